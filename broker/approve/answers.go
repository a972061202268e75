package approve

import (
	"context"
	"errors"
	"fmt"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/audit"
)

// AnswerCall applies an answer to an approval that inputLayer took out
// of the call: from the client's elicitation UI, or relayed by the model
// (pml:continue_workflow, or a continue_workflow argument of the tool).
func (ap *Approver) AnswerCall(ctx context.Context, c *Call) Result {
	if c.Req.Elicited != nil {
		return ap.elicited(ctx, c)
	}
	tool := c.Tool
	if tool == call.ContinueTool {
		tool = "" // the workflow names its tool
	}
	return ap.continueWorkflow(ctx, c, *c.Cont, tool)
}

// continueWorkflow applies an answer relayed by the model
// (continue_workflow): the seeds' channel for clients without elicitation.
// It is refused for a workflow put to the person through the client's own
// dialog, and altogether under hil.require_elicitation.
func (ap *Approver) continueWorkflow(ctx context.Context, c *Call, cont Continuation, tool string) Result {
	wfs := c.Req.Workflows
	wf, err := wfs.TakeRelayed(cont.WorkflowID, tool)
	if err == nil && ap.Config.HIL.RequireElicitation {
		wfs.Finish(wf)
		err = errRelayOff
	}
	if err != nil {
		ap.refusedAnswer(c, tool, cont.WorkflowID, wf, err)
		return errorResult(err)
	}
	return ap.Answer(ctx, c, wfs, wf, cont.Approved, cont.Always)
}

// refusedAnswer audits an answer that was not applied.
func (ap *Approver) refusedAnswer(c *Call, tool, id string, wf *Workflow, err error) {
	switch {
	case wf != nil:
		tool = wf.Tool
	case tool == "":
		tool = c.Tool // pml:continue_workflow for a workflow it does not know
	}
	switch {
	case errors.Is(err, workflow.ErrAnsweredInDialog) || errors.Is(err, errRelayOff):
		c.Note(audit.Entry{Tool: tool, Decision: audit.Rejected, WorkflowID: id, Reason: "relayed answer refused"})
	case errors.Is(err, workflow.ErrWorkflowExpired):
		c.Note(audit.Entry{Tool: tool, Decision: audit.Expired, WorkflowID: id})
	default:
		c.Note(audit.Entry{Tool: tool, Decision: audit.Failed, WorkflowID: id, Reason: "continuation refused"})
	}
}

// elicited applies an answer given in the client's elicitation UI (multi
// round-trip). An answer other than continue or always (abort, decline,
// cancel) is final: the workflow ends and nothing runs.
func (ap *Approver) elicited(ctx context.Context, c *Call) Result {
	e, tool := c.Req.Elicited, c.Tool
	wf, err := c.Req.Workflows.Take(e.WorkflowID, tool)
	if err != nil {
		ap.refusedAnswer(c, tool, e.WorkflowID, wf, err)
		return errorResult(err)
	}
	return ap.dialogAnswer(ctx, c, c.Req.Workflows, wf, e.Choice)
}

// Answer runs (or aborts) a workflow that take has claimed.
func (ap *Approver) Answer(ctx context.Context, c *Call, wfs *Workflows, wf *Workflow, approved, always bool) Result {
	if ap.Paused(wf) {
		return ap.ResumeRun(ctx, c, wfs, wf, approved, always)
	}
	keys := audit.Keys(wf.Args)
	if !approved {
		wfs.Finish(wf)
		c.Note(audit.Entry{Tool: wf.Tool, Decision: audit.Rejected, WorkflowID: wf.ID, ArgKeys: keys})
		return Result{
			Text:       fmt.Sprintf("Rejected: %s.", notRun(wf)),
			Structured: map[string]any{"status": "rejected", "workflow_id": wf.ID, "tool": wf.Tool},
			IsError:    true,
		}
	}
	decision := audit.Approved
	if g, ok := wf.Data.(*networkGrant); ok && wf.Type == ApprovalNetwork {
		return ap.answerNetwork(ctx, c, wfs, wf, g, always)
	}
	if wf.Type == ApprovalIntegrity {
		wfs.Finish(wf)
		c.Note(audit.Entry{Tool: wf.Tool, Decision: audit.Approved, WorkflowID: wf.ID, Reason: "integrity change approved", ArgKeys: keys})
		return ap.ApproveIntegrity(ctx, c, wfs, wf)
	}
	if wf.Type == ApprovalRegistryGrant {
		// Recorded first: if it cannot be, nothing runs. "always" adds
		// nothing here (the grant is kept either way; the tool's own
		// permission is not what was asked).
		if err := ap.RecordGrant(wf); err != nil {
			wfs.Release(wf)
			c.Note(audit.Entry{Tool: wf.Tool, Decision: audit.Failed, WorkflowID: wf.ID, Reason: "could not record the registry grant", ArgKeys: keys})
			return errorResult(fmt.Errorf("could not record the grant for %s: %v; %s", wf.Tool, err, notRun(wf)))
		}
		wfs.Finish(wf)
		return ap.Run(ctx, c, wf.Tool, wf.Args, decision, wf.Pattern, wf.ID)
	}
	if d, ok := wf.Data.(*call.Declared); ok {
		if always {
			wfs.Release(wf)
			c.Note(audit.Entry{Tool: wf.Tool, Decision: audit.Failed, WorkflowID: wf.ID, Reason: "always cannot be kept"})
			return errorResult(fmt.Errorf("%w: \"always\" is not offered for %s: %s. The call was not run; answer again with always: false to run it once", call.ErrInvalidInput, wf.Tool, alwaysNotForDeclared))
		}
		if res, denied := ap.deniedSince(c, wf, d); denied {
			wfs.Finish(wf)
			return res
		}
		// The run starts with the declared tools the person just approved.
		c.UpFront = d.Approved(wf.ID)
	}
	if always {
		if why := ap.alwaysBlocked(wf.Tool); why != "" {
			wfs.Release(wf)
			c.Note(audit.Entry{Tool: wf.Tool, Decision: audit.Failed, WorkflowID: wf.ID, Reason: "always cannot be kept"})
			return errorResult(fmt.Errorf("%w: \"always\" is not offered for %s: %s. The call was not run; answer again with always: false to run it once", call.ErrInvalidInput, wf.Tool, why))
		}
		// Save first, run after: if the file cannot be written the call
		// has not run, and the user can answer again without "always".
		if err := ap.AllowAlways(wf.Tool); err != nil {
			wfs.Release(wf)
			c.Note(audit.Entry{Tool: wf.Tool, Decision: audit.Failed, WorkflowID: wf.ID, Reason: "could not save always"})
			return errorResult(fmt.Errorf("could not remember \"always\" for %s: %v. The call was not run; answer again with always: false to run it once", wf.Tool, err))
		}
		decision = audit.Always
	}
	wfs.Finish(wf)
	return ap.Run(ctx, c, wf.Tool, wf.Args, decision, wf.Pattern, wf.ID)
}
