package clients

import "runtime"

// Whether pml's approvals reach a person depends on the client: pml puts
// an approval in the client's own dialog (MCP elicitation) when the client
// declares it, and otherwise hands it to the model as approval_required,
// which the model answers with continue_workflow. pml learns which only
// when the client connects, so what init and doctor say beforehand is
// what each client is known to do (November 2026), and where that is not
// known, the rule itself.

// RequireHint is how to require a person for every approval.
const RequireHint = `to require a person, set "hil": {"require_elicitation": true} in .pml.json: an approval the client cannot show then fails closed and nothing that needs one runs`

// Approvals says whether pml's approvals reach a person in the
// client name, and what happens otherwise; dialog is false for a client
// known to have no dialog for them (init then proposes RequireHint).
func Approvals(name string) (text string, dialog bool) {
	switch name {
	case ClaudeCode:
		return "approvals reach you in Claude Code's own dialog (MCP elicitation); in print mode (claude -p) nobody sees it: Claude Code closes it, pml reports \"the client closed pml's dialog; no person answered\" and nothing runs", true
	case "codex":
		return "codex declares a dialog for pml's approvals (MCP elicitation); codex exec declines it by itself, with nobody asked, and nothing that needs an approval runs", true
	case "vscode":
		return "approvals reach you in VS Code's own dialog (MCP elicitation)", true
	case "opencode":
		return "opencode has no dialog for pml's approvals: its model answers them itself (continue_workflow), so what pml asks about runs with no person involved unless opencode's own permission settings ask you before each pml tool call", false
	case "gemini-cli":
		return "gemini-cli has no dialog for pml's approvals: its model answers them itself (continue_workflow); gemini asks you to confirm that tool call, but with --yolo (or the tool in its trusted list) no person answers", false
	}
	title := name
	if c, err := Lookup(name); err == nil {
		title = c.Title
	}
	return "approvals reach you in " + title + "'s own dialog if it declares MCP elicitation when it connects; otherwise its model answers them itself (continue_workflow)", true
}

// ClaudeCode is the client whose project file is .mcp.json, which pml
// init writes itself (internal/mcpjson: consent, key migration, protect).
const ClaudeCode = "claude-code"

// EnvFrom is the user's environment read through getenv (tests point
// HOME at a temporary directory). Without a HOME, no user-level file is
// known.
func EnvFrom(getenv func(string) string) Env {
	return Env{Home: getenv("HOME"), GOOS: runtime.GOOS, Getenv: getenv}
}
