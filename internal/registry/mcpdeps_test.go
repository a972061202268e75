package registry

import (
	"strings"
	"testing"
)

const depSRI = "sha512-5U3OZh8Xq0Li4nA26l6uNvV9/1suMDuWSn+NjLZIhzinhMY6N3A4DCrxVecBGPf2PsNFKTEv5krxGPRwzxc7jQ=="

func depsOf(t *testing.T, deps string) ([]McpDep, error) {
	t.Helper()
	f, err := ParseFQDN("casys.pml.smartsearch.server")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMetadata(f, []byte(`{"type": "deno", "code_url": "https://example.com/c.ts", `+deps+`}`))
	if err != nil {
		return nil, err
	}
	return m.McpDeps, nil
}

// The seeds' shape (seed 000: install as a command line, version,
// integrity) and pml's own (install as {command, args}, mcpDeps) both read.
func TestMcpDepsShapes(t *testing.T) {
	got, err := depsOf(t, `"mcp_deps": [{"name": "memory", "type": "stdio", "install": "npx @modelcontextprotocol/server-memory@1.2.3",
		"version": "1.2.3", "integrity": "`+depSRI+`", "env_required": ["API_KEY"]}]`)
	if err != nil || len(got) != 1 {
		t.Fatalf("seed shape: %v %+v", err, got)
	}
	d := got[0]
	if d.Name != "memory" || d.Version != "1.2.3" || d.Integrity != depSRI || strings.Join(d.Install, " ") != "npx @modelcontextprotocol/server-memory@1.2.3" || strings.Join(d.EnvRequired, ",") != "API_KEY" {
		t.Errorf("seed shape: %+v", d)
	}
	got, err = depsOf(t, `"mcpDeps": [{"name": "files", "install": {"command": "npm", "args": ["install", "@x/server-files@2.0.0"], "integrity": "`+depSRI+`"}}]`)
	if err != nil || len(got) != 1 || got[0].Integrity != depSRI || strings.Join(got[0].Install, " ") != "npm install @x/server-files@2.0.0" {
		t.Fatalf("object shape: %v %+v", err, got)
	}
	if got, err := depsOf(t, `"description": "none"`); err != nil || got != nil {
		t.Errorf("no mcp_deps: %v %+v", err, got)
	}
}

// A malformed mcp_deps is refused with the field that is wrong.
func TestMcpDepsMalformed(t *testing.T) {
	for _, c := range []struct{ deps, want string }{
		{`"mcp_deps": {"name": "memory"}`, `"mcp_deps" must be a list`},
		{`"mcp_deps": ["memory"]`, `"mcp_deps[0]" is not a valid dependency`},
		{`"mcp_deps": [{"name": "Memory!", "install": "npx m@1.0.0", "integrity": "` + depSRI + `"}]`, `"mcp_deps[0].name"`},
		{`"mcp_deps": [{"name": "filesystem", "install": "npx m@1.0.0", "integrity": "` + depSRI + `"}]`, `built-in namespace`},
		{`"mcp_deps": [{"name": "memory", "integrity": "` + depSRI + `"}]`, `"mcp_deps[0].install" is required`},
		{`"mcp_deps": [{"name": "smartsearch", "install": "npx m@1.0.0", "integrity": "` + depSRI + `"}]`, `the capability's own namespace`},
		{`"mcp_deps": [{"name": "memory", "install": 3, "integrity": "` + depSRI + `"}]`, `"mcp_deps[0].install" must be`},
		{`"mcp_deps": [{"name": "memory", "install": "npx m@1.0.0"}]`, `"mcp_deps[0].integrity" is required`},
		{`"mcp_deps": [{"name": "memory", "install": "npx m@1.0.0", "integrity": "sha256-abc123..."}]`, `"mcp_deps[0].integrity": "sha256-abc123..." is not`},
		{`"mcp_deps": [{"name": "memory", "type": "http", "install": "npx m@1.0.0", "integrity": "` + depSRI + `"}]`, `"mcp_deps[0].type" must be "stdio"`},
		{`"mcp_deps": [{"name": "m", "install": "npx m@1.0.0", "integrity": "` + depSRI + `"}, {"name": "m", "install": "npx m@1.0.0", "integrity": "` + depSRI + `"}]`, `"mcp_deps[1].name": "m" is listed twice`},
		{`"mcp_deps": [{"name": "m", "install": "npx m@1.0.0", "integrity": "` + depSRI + `", "env_required": ["A-B"]}]`, `"mcp_deps[0].env_required" holds "A-B"`},
	} {
		_, err := depsOf(t, c.deps)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %s", c.deps, err, c.want)
		}
	}
}

// A dependency runs as the seeds' install line would as a registry
// server: node in NodeImage, npm into /deps, pinned by its integrity.
func TestDepServer(t *testing.T) {
	d := McpDep{Name: "everything", Version: "2026.8.31", Integrity: depSRI, Install: []string{"npx", "-y", "@modelcontextprotocol/server-everything@2026.8.31"}}
	s, err := DepServer(&Entry{FQDN: "casys.pml.smartsearch.server.abcd"}, d)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "everything" || s.Image != NodeImage || s.Install == nil || s.Install.Integrity != depSRI || s.Install.Package != "@modelcontextprotocol/server-everything" {
		t.Errorf("%+v %+v", s, s.Install)
	}
	d.Version = "1.0.0"
	if _, err := DepServer(nil, d); err == nil || !strings.Contains(err.Error(), `"version": "1.0.0"`) {
		t.Errorf("a version that disagrees with the install line: %v", err)
	}
	d.Install = []string{"pip", "install", "x"}
	if _, err := DepServer(nil, d); err == nil {
		t.Error("a pip install was accepted")
	}
}
