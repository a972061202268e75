package clients

import "path/filepath"

// The clients, their files and their formats, as each client documents
// them (checked against their documentation in November 2026).

// mcpServersEntry is the common shape: {"command", "args", "env"}.
func mcpServersEntry(s Server) fields {
	return fields{{"command", s.Command}, {"args", args(s.Args)}, {"env", envFields(s.Env)}}
}

// stdioEntry adds "type": "stdio" (Claude Code, VS Code).
func stdioEntry(s Server) fields {
	return append(fields{{"type", "stdio"}}, mcpServersEntry(s)...)
}

// mcpServersJSON is a JSON file with the servers under "mcpServers". The
// same editor serves files that allow comments and files that do not: it
// adds none, and keeps those that are there.
var mcpServersJSON = jsonFormat{key: "mcpServers", build: mcpServersEntry}

func vscodeUser(e Env) string {
	return filepath.Join(e.appData(), "Code", "User")
}

// All are the known clients, in the order pml clients lists them.
var All = []*Client{
	{
		Name: "claude-code", Title: "Claude Code",
		// Project scope is .mcp.json, which pml init writes itself
		// (internal/mcpjson); this entry serves --scope user and status.
		project: ".mcp.json",
		user:    func(e Env) string { return e.home(".claude.json") },
		detect:  func(e Env) []string { return []string{e.home(".claude"), e.home(".claude.json")} },
		format:  jsonFormat{key: "mcpServers", build: stdioEntry},
	},
	{
		Name: "claude-desktop", Title: "Claude Desktop",
		user:   func(e Env) string { return filepath.Join(e.appData(), "Claude", "claude_desktop_config.json") },
		detect: func(e Env) []string { return []string{filepath.Join(e.appData(), "Claude")} },
		format: mcpServersJSON,
	},
	{
		Name: "cursor", Title: "Cursor",
		project: ".cursor/mcp.json",
		user:    func(e Env) string { return e.home(".cursor", "mcp.json") },
		detect:  func(e Env) []string { return []string{e.home(".cursor")} },
		format:  mcpServersJSON,
	},
	{
		Name: "vscode", Title: "VS Code (GitHub Copilot)",
		project: ".vscode/mcp.json",
		user:    func(e Env) string { return filepath.Join(vscodeUser(e), "mcp.json") },
		detect:  func(e Env) []string { return []string{filepath.Join(e.appData(), "Code")} },
		// JSON with comments; servers under "servers".
		format: jsonFormat{key: "servers", build: stdioEntry},
	},
	{
		Name: "windsurf", Title: "Windsurf",
		user:   func(e Env) string { return e.home(".codeium", "windsurf", "mcp_config.json") },
		detect: func(e Env) []string { return []string{e.home(".codeium", "windsurf")} },
		format: mcpServersJSON,
	},
	{
		Name: "codex", Title: "Codex",
		// Codex reads .codex/config.toml only in a project it trusts.
		project: ".codex/config.toml",
		user:    func(e Env) string { return filepath.Join(codexHome(e), "config.toml") },
		detect:  func(e Env) []string { return []string{codexHome(e)} },
		format:  tomlFormat{},
	},
	{
		Name: "gemini-cli", Title: "Gemini CLI",
		project: ".gemini/settings.json",
		user:    func(e Env) string { return e.home(".gemini", "settings.json") },
		detect:  func(e Env) []string { return []string{e.home(".gemini")} },
		format:  mcpServersJSON,
	},
	{
		Name: "zed", Title: "Zed",
		project: ".zed/settings.json",
		user:    func(e Env) string { return filepath.Join(zedConfig(e), "settings.json") },
		detect:  func(e Env) []string { return []string{zedConfig(e)} },
		// JSON with comments; servers under "context_servers".
		format: jsonFormat{key: "context_servers", build: mcpServersEntry},
	},
	{
		Name: "cline", Title: "Cline (VS Code extension)",
		user: func(e Env) string {
			return filepath.Join(vscodeUser(e), "globalStorage", "saoudrizwan.claude-dev", "settings", "cline_mcp_settings.json")
		},
		detect: func(e Env) []string {
			return []string{filepath.Join(vscodeUser(e), "globalStorage", "saoudrizwan.claude-dev")}
		},
		format: mcpServersJSON,
	},
	{
		Name: "continue", Title: "Continue",
		// A project's MCP servers are block files in .continue/mcpServers/;
		// pml's is its own file there.
		project: ".continue/mcpServers/pml.yaml",
		user:    func(e Env) string { return e.home(".continue", "config.yaml") },
		detect:  func(e Env) []string { return []string{e.home(".continue")} },
		format: yamlFormat{key: "mcpServers", list: true, cmdKey: "command", envKey: "env",
			empty: "name: pml\nversion: 0.0.1\nschema: v1\nmcpServers: []\n",
			build: func(s Server) fields {
				return fields{{"name", ServerName}, {"command", s.Command}, {"args", args(s.Args)}, {"env", envFields(s.Env)}}
			}},
	},
	{
		Name: "goose", Title: "goose",
		user: func(e Env) string { return filepath.Join(gooseConfig(e), "config.yaml") },
		detect: func(e Env) []string {
			return []string{gooseConfig(e)}
		},
		format: yamlFormat{key: "extensions", cmdKey: "cmd", envKey: "envs",
			build: func(s Server) fields {
				return fields{{"name", ServerName}, {"type", "stdio"}, {"cmd", s.Command}, {"args", args(s.Args)},
					{"envs", envFields(s.Env)}, {"enabled", true}, {"timeout", 300}}
			}},
	},
	{
		Name: "opencode", Title: "opencode",
		project: "opencode.json",
		user:    func(e Env) string { return filepath.Join(e.xdgConfig(), "opencode", "opencode.json") },
		detect:  func(e Env) []string { return []string{filepath.Join(e.xdgConfig(), "opencode")} },
		// JSON with comments; servers under "mcp", the command one array.
		jsoncToo: true,
		format: jsonFormat{key: "mcp", envKey: "environment",
			empty: "{\n  \"$schema\": \"https://opencode.ai/config.json\"\n}\n",
			build: func(s Server) fields {
				return fields{{"type", "local"}, {"command", append([]string{s.Command}, s.Args...)},
					{"environment", envFields(s.Env)}, {"enabled", true}}
			}},
	},
}

func codexHome(e Env) string {
	if d := e.getenv("CODEX_HOME"); d != "" && filepath.IsAbs(d) {
		return d
	}
	return e.home(".codex")
}

func zedConfig(e Env) string {
	if e.GOOS == "windows" {
		return filepath.Join(e.appData(), "Zed")
	}
	if e.GOOS == "darwin" {
		return e.home(".config", "zed")
	}
	return filepath.Join(e.xdgConfig(), "zed")
}

func gooseConfig(e Env) string {
	if e.GOOS == "windows" {
		return filepath.Join(e.appData(), "Block", "goose", "config")
	}
	return filepath.Join(e.xdgConfig(), "goose")
}
