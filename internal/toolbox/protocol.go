// Package toolbox holds pml's built-in client tools: their definitions (names,
// schemas, which arguments are paths, whether they write) and the agent that
// executes them inside a locked-down container.
//
// The broker validates every path before a container starts; the agent runs
// inside the container (`pml-inside toolbox-agent`, cmd/pml-inside), reads one Request as JSON from
// stdin, executes it, and writes one Response as JSON to stdout.
package toolbox

import (
	"encoding/json"

	"github.com/pml-dev/pml/internal/pathguard"
)

// Subcommand is the in-container program's command that runs Serve.
const Subcommand = "toolbox-agent"

// Request is what the broker sends to the in-container agent.
type Request struct {
	// Tool is the client-visible name, e.g. "filesystem:read_file".
	Tool string `json:"tool"`
	// Args are the tool arguments. Path arguments have already been resolved
	// by the broker to absolute, cleaned, symlink-free paths inside Workspace.
	Args json.RawMessage `json:"args"`
	// Workspace is the absolute workspace root (mounted at the same path).
	Workspace string `json:"workspace"`
	// Mounts are the extra mounts (sandbox.mounts) the container has
	// beyond the workspace: paths in them are allowed too, and only
	// read in a read-only one.
	Mounts []pathguard.Mount `json:"mounts,omitempty"`
	// DeadlineMS, when set, is the container's own deadline: the agent
	// exits (ending its container) when it passes, even if pml, which
	// normally kills the container first, is gone.
	DeadlineMS int64 `json:"deadline_ms,omitempty"`
}

// Response is what the agent writes back.
type Response struct {
	// Text is the human/LLM-readable result (or error message when IsError).
	Text string `json:"text"`
	// Structured is optional machine-readable output (MCP structuredContent).
	Structured json.RawMessage `json:"structured,omitempty"`
	// IsError marks a tool error (bad input, file not found, ...).
	IsError bool `json:"isError,omitempty"`
}
