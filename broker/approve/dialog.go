package approve

import (
	"context"
	"fmt"
	"strings"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/config"
)

// A person's answer has two channels. The client's own dialog (MCP
// elicitation) shows the question to the person and hands back what they
// chose; pml trusts it as the person's answer. continue_workflow is
// written by the model, which relays what the person said in the chat:
// pml trusts the client for it. So an approval put to the person in the
// dialog is answered there only, and a "no" there is final: a relayed
// answer for it is refused. hil.require_elicitation turns the relay off.

// errRelayOff: a relayed answer under hil.require_elicitation.
var errRelayOff error = workflow.RelayRefused("hil.require_elicitation is set, so approvals are answered only in the client's own dialog, never with continue_workflow; the call is not run")

// NeedsDialog fails an approval closed before it is offered when
// hil.require_elicitation is set and the client has no dialog to put it
// in: no workflow is created, so there is nothing to relay an answer to.
func (ap *Approver) NeedsDialog(c *Call, tool, pattern string, args map[string]any) (Result, bool) {
	if !ap.Config.HIL.RequireElicitation || c.Req.Ask != nil || c.Req.Dialog {
		return Result{}, false
	}
	c.Note(audit.Entry{Tool: tool, Decision: audit.Rejected, Pattern: pattern, Reason: "hil.require_elicitation: the client has no elicitation", ArgKeys: audit.Keys(args)})
	return errorResult(fmt.Errorf("%w: %s needs a person's approval, and hil.require_elicitation in %s allows approvals only through the client's own dialog (MCP elicitation), which this client does not offer; nothing ran. "+
		"Use a client with elicitation, or allow the tool in permissions.allow%s", call.ErrDenied, tool, ap.Config.Path, ap.untrustedNote(func(g config.Grant) bool {
		return strings.HasPrefix(g.Key, "hil.require_elicitation=")
	}))), true
}

// AskInDialog puts a new approval to the person through the client's
// dialog when it has one. Answered there, the answer is applied at once
// and is final; otherwise the approval_required result goes back (and,
// for a multi round-trip client, becomes an input request of its dialog).
func (ap *Approver) AskInDialog(ctx context.Context, c *Call, wf *Workflow, a Approval) Result {
	req, wfs := c.Req, c.Req.Workflows
	if req.Ask != nil {
		// Marked before the question is out: a relayed answer racing the
		// dialog is refused too.
		wfs.ToDialog(wf, true)
		choice, shown := req.Ask(ctx, a)
		if shown {
			if _, err := wfs.Take(wf.ID, wf.Tool); err != nil {
				ap.refusedAnswer(c, wf.Tool, wf.ID, wf, err)
				return errorResult(err)
			}
			return ap.dialogAnswer(ctx, c, wfs, wf, choice)
		}
		// The question never reached the person (the client failed the
		// request): the relay remains, unless it is turned off.
		wfs.ToDialog(wf, false)
		if ap.Config.HIL.RequireElicitation {
			wfs.Finish(wf)
			c.Note(audit.Entry{Tool: wf.Tool, Decision: audit.Rejected, Pattern: wf.Pattern, WorkflowID: wf.ID, Reason: "hil.require_elicitation: the client's dialog failed"})
			return errorResult(fmt.Errorf("%w: %s needs a person's approval, the client's dialog (MCP elicitation) failed to ask, and hil.require_elicitation allows no other way; %s. Call the tool again to be asked again", call.ErrDenied, wf.Tool, notRun(wf)))
		}
		return ApprovalResult(a)
	}
	if req.Dialog {
		wfs.ToDialog(wf, true)
	}
	return ApprovalResult(a)
}

// dialogAnswer applies what the person chose in the client's dialog to a
// taken workflow. Only continue and always run the call; anything else
// (abort, declined, cancelled, not answered) ends the workflow.
func (ap *Approver) dialogAnswer(ctx context.Context, c *Call, wfs *Workflows, wf *Workflow, choice string) Result {
	switch choice {
	case "continue", "always":
		wfs.Settled(wf, choice, false)
		return ap.Answer(ctx, c, wfs, wf, true, choice == "always")
	}
	what := DialogOutcome(choice)
	wfs.Settled(wf, what, false)
	return ap.answer(ctx, c, wfs, wf, Answer{Declined: what})
}

// DialogOutcome says what ended a dialog without an approval, no more
// than pml knows: what the client answered. MCP elicitation's "decline"
// is meant as a person's no, but codex exec declines by itself with
// nobody asked; "cancel" only says the dialog closed without a choice:
// Claude Code in print mode closes it at once with nobody there, and a
// person pressing Escape looks the same. Neither is told as a person's
// answer.
func DialogOutcome(choice string) string {
	switch choice {
	case "abort", "":
		return "Abort was chosen in the client's dialog"
	case "declined":
		return "the client declined pml's dialog (a person's no, or the client's own where nobody can be asked, as codex exec does)"
	case "cancelled":
		return "the client closed pml's dialog; no person answered"
	case "not answered":
		return "pml's dialog got no answer in time; no person answered"
	}
	return "the client's dialog ended with " + choice
}

var errDeclined = fmt.Errorf("%w: declined in the client's dialog", call.ErrDenied)
