package toolbox

import "encoding/json"

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
}

// Schemas never set additionalProperties: false, because pml adds the
// continue_workflow argument to any call.
var Filesystem = []Tool{
	{
		Name:        "filesystem:read_file",
		Description: "Read a text file from the workspace. Optional head/tail return only the first or last N lines.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"File path, absolute or relative to the workspace."},"head":{"type":"integer","minimum":0,"description":"Return only the first N lines."},"tail":{"type":"integer","minimum":0,"description":"Return only the last N lines."}},"required":["path"]}`),
		PathArgs:    []string{"path"},
	},
	{
		Name:        "filesystem:read_multiple_files",
		Description: "Read several files at once; a file that cannot be read reports its error without failing the others.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"paths":{"type":"array","items":{"type":"string"},"description":"File paths, absolute or relative to the workspace."}},"required":["paths"]}`),
		PathArgs:    []string{"paths"},
	},
	{
		Name:        "filesystem:write_file",
		Description: "Create a file or replace its content. The parent directory must exist.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"File path, absolute or relative to the workspace."},"content":{"type":"string","description":"The complete new content."}},"required":["path","content"]}`),
		PathArgs:    []string{"path"},
		Writes:      true,
	},
	{
		Name:        "filesystem:edit_file",
		Description: "Apply exact-text replacements to a file and return a diff. Each oldText must occur exactly once; if any edit fails nothing is written. dryRun shows the diff without writing.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"File path, absolute or relative to the workspace."},"edits":{"type":"array","items":{"type":"object","properties":{"oldText":{"type":"string","description":"Text to find (exactly once)."},"newText":{"type":"string","description":"Replacement."}},"required":["oldText","newText"]}},"dryRun":{"type":"boolean","description":"Preview the diff without writing."}},"required":["path","edits"]}`),
		PathArgs:    []string{"path"},
		Writes:      true,
	},
	{
		Name:        "filesystem:list_directory",
		Description: "List a directory: one line per entry, [DIR] or [FILE] then the name.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Directory path, absolute or relative to the workspace."}},"required":["path"]}`),
		PathArgs:    []string{"path"},
	},
	{
		Name:        "filesystem:directory_tree",
		Description: "A recursive JSON tree of a directory: [{name, type: file|directory, children}].",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Directory path, absolute or relative to the workspace."}},"required":["path"]}`),
		PathArgs:    []string{"path"},
	},
	{
		Name:        "filesystem:create_directory",
		Description: "Create a directory and any missing parents; an existing directory is fine.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Directory path, absolute or relative to the workspace."}},"required":["path"]}`),
		PathArgs:    []string{"path"},
		Writes:      true,
	},
	{
		Name:        "filesystem:move_file",
		Description: "Move or rename a file or directory. Fails if the destination exists.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"source":{"type":"string","description":"Existing path."},"destination":{"type":"string","description":"New path (must not exist)."}},"required":["source","destination"]}`),
		PathArgs:    []string{"source", "destination"},
		Writes:      true,
	},
	{
		Name:        "filesystem:search_files",
		Description: "Find files and directories below a path whose name matches a pattern: a glob (*.go) or, without wildcards, a case-insensitive substring. Returns absolute paths.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Directory to search, absolute or relative to the workspace."},"pattern":{"type":"string","description":"Glob or substring."},"excludePatterns":{"type":"array","items":{"type":"string"},"description":"Globs of names or relative paths to skip."}},"required":["path","pattern"]}`),
		PathArgs:    []string{"path"},
	},
	{
		Name:        "filesystem:get_file_info",
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
