//go:build !pml_inside

// The tool definitions are pml's (the host's), not the agent's: the
// in-container program (cmd/pml-inside) is built with -tags pml_inside
// and leaves this file, and with it the MCP SDK and net/http, out. That
// keeps it about a third of its size.

package toolbox

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool defines one built-in client tool.
type Tool struct {
	Name        string          // "filesystem:read_file"
	Description string          // what a person and a model need to use it
	InputSchema json.RawMessage // JSON Schema (type object)
	// PathArgs name the arguments that hold paths ("paths" is a list);
	// the broker validates and resolves them before a container starts.
	PathArgs []string
	// Writes marks tools that change the workspace: their container gets a
	// read-write mount; every other tool's mount is read-only.
	Writes bool
	// Title is the name a person reads in a client's tool list.
	Title string
	// Annotations are the MCP tool hints clients show and act on (e.g.
	// asking before a destructive tool). A server's own pass through.
	Annotations *mcp.ToolAnnotations
	// OutputSchema, Meta and Icons are a server's own, passed to the
	// client as the server listed them (broker/tools/server_tools.go
	// bounds them); pml reads none of them. Meta carries what extensions
	// announce, e.g. an MCP App's UI resource (_meta.ui.resourceUri).
	OutputSchema json.RawMessage
	Meta         mcp.Meta
	Icons        []mcp.Icon
	// Execution is a server's tool's `execution` (MCP 2025-11-25, e.g.
	// {"taskSupport":"optional"}), passed to the client as the server
	// wrote it (a JSON object, bounded: broker/tools/server_tools.go);
	// pml reads none of it. The go-sdk's Tool has no such field, so it
	// travels as raw JSON.
	Execution json.RawMessage
}

// Hints builds the annotations of a built-in tool. Built-in tools only
// touch the mounted workspace, never the network: openWorldHint is false.
func Hints(title string, readOnly, destructive, idempotent bool) *mcp.ToolAnnotations {
	f := false
	a := &mcp.ToolAnnotations{Title: title, ReadOnlyHint: readOnly, IdempotentHint: idempotent, OpenWorldHint: &f}
	// destructiveHint only means something for a tool that writes.
	d := destructive && !readOnly
	a.DestructiveHint = &d
	return a
}

// Schemas never set additionalProperties: false, because pml adds the
// continue_workflow argument to any call.
var Filesystem = []Tool{
	{
		Name:        "filesystem:read_file",
		Title:       "Read file",
		Annotations: Hints("Read file", true, false, true),
		Description: "Read a text file from the workspace. Optional head/tail return only the first or last N lines.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"File path, absolute or relative to the workspace."},"head":{"type":"integer","minimum":0,"description":"Return only the first N lines."},"tail":{"type":"integer","minimum":0,"description":"Return only the last N lines."}},"required":["path"]}`),
		PathArgs:    []string{"path"},
	},
	{
		Name:        "filesystem:read_multiple_files",
		Title:       "Read multiple files",
		Annotations: Hints("Read multiple files", true, false, true),
		Description: "Read several files at once; a file that cannot be read reports its error without failing the others.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"paths":{"type":"array","items":{"type":"string"},"description":"File paths, absolute or relative to the workspace."}},"required":["paths"]}`),
		PathArgs:    []string{"paths"},
	},
	{
		Name:        "filesystem:write_file",
		Title:       "Write file",
		Annotations: Hints("Write file", false, true, true),
		Description: "Create a file or replace its content. The parent directory must exist.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"File path, absolute or relative to the workspace."},"content":{"type":"string","description":"The complete new content."}},"required":["path","content"]}`),
		PathArgs:    []string{"path"},
		Writes:      true,
	},
	{
		Name:        "filesystem:edit_file",
		Title:       "Edit file",
		Annotations: Hints("Edit file", false, true, false),
		Description: "Apply exact-text replacements to a file and return a diff. Each oldText must occur exactly once; if any edit fails nothing is written. dryRun shows the diff without writing.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"File path, absolute or relative to the workspace."},"edits":{"type":"array","items":{"type":"object","properties":{"oldText":{"type":"string","description":"Text to find (exactly once)."},"newText":{"type":"string","description":"Replacement."}},"required":["oldText","newText"]}},"dryRun":{"type":"boolean","description":"Preview the diff without writing."}},"required":["path","edits"]}`),
		PathArgs:    []string{"path"},
		Writes:      true,
	},
	{
		Name:        "filesystem:list_directory",
		Title:       "List directory",
		Annotations: Hints("List directory", true, false, true),
		Description: "List a directory: one line per entry, [DIR] or [FILE] then the name.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Directory path, absolute or relative to the workspace."}},"required":["path"]}`),
		PathArgs:    []string{"path"},
	},
	{
		Name:        "filesystem:directory_tree",
		Title:       "Directory tree",
		Annotations: Hints("Directory tree", true, false, true),
		Description: "A recursive JSON tree of a directory: [{name, type: file|directory, children}].",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Directory path, absolute or relative to the workspace."}},"required":["path"]}`),
		PathArgs:    []string{"path"},
	},
	{
		Name:        "filesystem:create_directory",
		Title:       "Create directory",
		Annotations: Hints("Create directory", false, false, true),
		Description: "Create a directory and any missing parents; an existing directory is fine.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Directory path, absolute or relative to the workspace."}},"required":["path"]}`),
		PathArgs:    []string{"path"},
		Writes:      true,
	},
	{
		Name:        "filesystem:move_file",
		Title:       "Move file",
		Annotations: Hints("Move file", false, true, false),
		Description: "Move or rename a file or directory. Fails if the destination exists.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"source":{"type":"string","description":"Existing path."},"destination":{"type":"string","description":"New path (must not exist)."}},"required":["source","destination"]}`),
		PathArgs:    []string{"source", "destination"},
		Writes:      true,
	},
	{
		Name:        "filesystem:search_files",
		Title:       "Search files",
		Annotations: Hints("Search files", true, false, true),
		Description: "Find files and directories below a path whose name matches a pattern: a glob (*.go) or, without wildcards, a case-insensitive substring. Returns absolute paths.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Directory to search, absolute or relative to the workspace."},"pattern":{"type":"string","description":"Glob or substring."},"excludePatterns":{"type":"array","items":{"type":"string"},"description":"Globs of names or relative paths to skip."}},"required":["path","pattern"]}`),
		PathArgs:    []string{"path"},
	},
	{
		Name:        "filesystem:get_file_info",
		Title:       "Get file info",
		Annotations: Hints("Get file info", true, false, true),
		Description: "Size, times, type and permissions of a file or directory.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Path, absolute or relative to the workspace."}},"required":["path"]}`),
		PathArgs:    []string{"path"},
	},
}

// Lookup finds a filesystem tool by name.
func Lookup(name string) (Tool, bool) {
	for _, t := range Filesystem {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}
