package main

import (
	"github.com/pml-dev/pml/internal/clients"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/safefs"
)

// Whether pml's approvals reach a person depends on the client: pml puts
// an approval in the client's own dialog (MCP elicitation) when the client
// declares it, and otherwise hands it to the model as approval_required,
// which the model answers with continue_workflow. pml learns which only
// when the client connects, so what init and doctor say beforehand is
// what each client is known to do (November 2026), and where that is not
// known, the rule itself.

// requireHint is how to require a person for every approval.
const requireHint = `to require a person, set "hil": {"require_elicitation": true} in .pml.json: an approval the client cannot show then fails closed and nothing that needs one runs`

// clientApprovals says whether pml's approvals reach a person in the
// client name, and what happens otherwise; dialog is false for a client
// known to have no dialog for them (init then proposes requireHint).
func clientApprovals(name string) (text string, dialog bool) {
	switch name {
	case claudeCode:
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
	if c, err := clients.Lookup(name); err == nil {
		title = c.Title
	}
	return "approvals reach you in " + title + "'s own dialog if it declares MCP elicitation when it connects; otherwise its model answers them itself (continue_workflow)", true
}

// requireElicitation: the project's .pml.json (as init leaves it) already
// requires a person, so init proposes nothing.
func (p *initPlan) requireElicitation() bool {
	data := p.pmlJSON
	if p.pmlExists {
		b, err := safefs.ReadFile(p.ws.Dir, p.pmlPath, safefs.MaxConfig)
		if err != nil {
			return false
		}
		data = b
	}
	cfg, err := config.Parse(p.pmlPath, data)
	return err == nil && cfg.HIL.RequireElicitation
}

// checkApprovals is doctor's line on whether approvals reach a person in
// the client name: a warning for a client known to have no dialog, unless
// the project already requires a person (hil.require_elicitation).
func checkApprovals(name string, required bool) check {
	text, dialog := clientApprovals(name)
	switch {
	case dialog:
		return check{"ok", name + " approvals", text, ""}
	case required:
		return check{"ok", name + " approvals", text + "; but hil.require_elicitation is set, so there such an approval fails closed and nothing runs", ""}
	}
	return check{"warn", name + " approvals", text, requireHint}
}

// requiresPerson: the workspace's configuration sets
// hil.require_elicitation (false when it cannot be read: doctor's
// configuration check says why).
func requiresPerson(ws string, getenv func(string) string) bool {
	cfg, err := config.Load(ws, getenv)
	return err == nil && cfg.HIL.RequireElicitation
}
