package approve

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/toolglob"
	"github.com/pml-dev/pml/internal/wirename"
)

// ApprovalFor describes a workflow by its type.
func (ap *Approver) ApprovalFor(wf *Workflow) Approval {
	switch wf.Type {
	case ApprovalAPIKey:
		return ap.Cloud.APIKeyApproval(wf)
	case ApprovalIntegrity:
		return ap.Integrity.IntegrityApproval(wf)
	case ApprovalToolChange:
		return ap.ToolChanges.ToolChangeApproval(wf)
	case ApprovalRegistryGrant:
		return ap.GrantApproval(wf)
	}
	if wf.Type == ApprovalDependency {
		if srv, ok := ap.Servers.ServerOf(wf.Tool); ok && srv.Install != nil {
			return ap.DependencyApproval(wf, srv)
		}
	}
	a := ap.Approval(wf)
	if d, ok := wf.Data.(*call.Declared); ok {
		withDeclared(&a, d) // upfront.go
	}
	return a
}

// Approval describes a workflow for the client.
func (ap *Approver) Approval(wf *Workflow) Approval {
	desc := fmt.Sprintf("Allow pml to run %s%s?", shown(wf.Tool), describeArgs(wf.Args))
	options := []string{"continue", "always", "abort"}
	ctx := map[string]any{"pattern": wf.Pattern, "workspace": ap.Workspace}
	if why := ap.alwaysBlocked(wf.Tool); why != "" {
		options = []string{"continue", "abort"}
		ctx["always_not_offered"] = why
	}
	desc += ap.describeAccess(wf.Tool, ctx) // access.go
	if note := ap.untrustedNote(func(g config.Grant) bool {
		pat, ok := strings.CutPrefix(g.Key, "permissions.allow=")
		d, _ := Permissions{Allow: []string{pat}}.Decide(wf.Tool)
		return ok && d == call.Allow
	}); note != "" {
		desc += note
		ctx["policy_not_trusted"] = ap.Config.Path
	}
	return Approval{
		ApprovalRequired: true,
		ApprovalType:     wf.Type,
		WorkflowID:       wf.ID,
		Tool:             wf.Tool,
		Arguments:        wf.Args,
		Description:      desc,
		Options:          options,
		ExpiresAt:        wf.Expires.UTC(),
		Context:          ctx,
	}
}

// ApprovalResult is a normal tool result (not an error) that asks.
func ApprovalResult(a Approval) Result {
	// The names a client calls: their wire names (filesystem__write_file).
	return Result{Text: ApprovalText(a, wirename.Encode(a.Tool)), Structured: a}
}

// ApprovalText is an approval's text for a client that answers it by
// calling callAs (the name the asking tool has in that client's tool
// list, e.g. `search` under pml run), or only through
// pml:continue_workflow when callAs is "" (the asking tool is not in its
// list).
func ApprovalText(a Approval, callAs string) string {
	always := ""
	if adds, ok := a.Context["always_adds"].(string); ok && slices.Contains(a.Options, "always") {
		always = fmt.Sprintf("\"always\" adds %s. ", adds)
	} else if slices.Contains(a.Options, "always") {
		// What AllowAlways saves: the name with its glob characters
		// escaped (evil:* as evil:\*).
		always = fmt.Sprintf("\"always\" adds %s to permissions.allow in .pml.json (and takes the exact name out of permissions.ask). ", shown(toolglob.Escape(a.Tool)))
	} else if why, ok := a.Context["always_not_offered"].(string); ok {
		always = fmt.Sprintf("\"always\" is not offered: %s. ", why)
	}
	how := fmt.Sprintf("To answer, call %s with {\"workflow_id\": %q, \"approved\": true|false, \"always\": true|false}. ", continueWire, a.WorkflowID)
	if callAs != "" {
		how = fmt.Sprintf("To answer, call %s again with the extra argument continue_workflow: {\"workflow_id\": %q, \"approved\": true|false, \"always\": true|false}, "+
			"or call %s with {\"workflow_id\": %q, \"approved\": ..., \"always\": ...}. ", callAs, a.WorkflowID, continueWire, a.WorkflowID)
	}
	return fmt.Sprintf("Approval required (%s): %s\n%s%sThis request expires at %s.",
		a.ApprovalType, a.Description, how, always, a.ExpiresAt.Format(time.RFC3339))
}

// describeArgs names the main target of a call for a one-sentence prompt.
func describeArgs(args map[string]any) string {
	for _, k := range []string{"command", "path", "source", "paths"} {
		if v, ok := args[k]; ok {
			// Quoted and bounded: the model wrote it, and the person
			// reads it in the client's dialog (internal/termsafe).
			return fmt.Sprintf(" with %s %s", k, shown(fmt.Sprint(v)))
		}
	}
	return ""
}

// DependencyApproval describes the install of srv's dependencies for a
// person.
func (ap *Approver) DependencyApproval(wf *Workflow, srv config.Server) Approval {
	a := ap.Approval(wf)
	inst := srv.Install
	hosts := append(deps.RegistryHosts(inst, ap.Workspace, os.Getenv), srv.Network.Rules.Strings()...)
	reach := "with no network"
	if len(hosts) > 0 {
		reach = "reaching only " + shown(strings.Join(hosts, ", ")) + " through pml's egress proxy"
	}
	if reg := deps.NPMRegistryOf(inst, ap.Workspace, os.Getenv); deps.UsesNPM(inst) && reg.Project {
		// The repository's .npmrc chose the registry: the person approves
		// that choice with the install.
		reach += ", from the npm registry " + shown(reg.URL) + " the repository's .npmrc names"
	}
	a.Description = fmt.Sprintf("Install the MCP server %s (`%s` in %s, %s, into %s) so that %s can run?",
		shown(srv.Name), termsafe.Quote(strings.TrimSpace(inst.Command+" "+strings.Join(inst.Args, " ")), 2*termsafe.DefaultMax), shown(srv.Image), reach, shown(ap.Deps.Dir(srv.Name)), shown(wf.Tool))
	a.Context = map[string]any{
		"server":    srv.Name,
		"version":   versionOf(inst),
		"command":   append([]string{inst.Command}, inst.Args...),
		"image":     srv.Image,
		"integrity": inst.Integrity,
		"network":   hosts,
		"pattern":   wf.Pattern,
		"workspace": ap.Workspace,
	}
	a.Description += ap.describeAccess(wf.Tool, a.Context)
	return a
}

// shown is a string pml did not write (a tool's or a server's name, an
// image, the model's arguments) as an approval shows it: control and bidi
// characters quoted, bounded (internal/termsafe).
func shown(s string) string { return termsafe.Quote(s, termsafe.DefaultMax) }

func versionOf(inst *config.Install) string {
	if len(inst.Args) == 0 {
		return ""
	}
	last := inst.Args[len(inst.Args)-1]
	if at := strings.LastIndexByte(last, '@'); at > 0 {
		return last[at+1:]
	}
	return ""
}
