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

// Answer runs (or aborts) a workflow that take has claimed. A payload
// that carries out the answer itself (Resumer: a paused run, a network
// approval) is handed it; otherwise an approved call runs through
// Execute, noted with what let it through.
func (ap *Approver) Answer(ctx context.Context, c *Call, wfs *Workflows, wf *Workflow, approved, always bool) Result {
	return ap.answer(ctx, c, wfs, wf, Answer{Approved: approved, Always: always})
}

// Answer is a person's answer to a taken workflow.
type Answer struct {
	Approved, Always bool
	// Declined is what ended the client's dialog without an approval
	// (DialogOutcome), "" for any other answer: the refusal then says
	// so, and that it is final.
	Declined string
}

func (ap *Approver) answer(ctx context.Context, c *Call, wfs *Workflows, wf *Workflow, a Answer) Result {
	if p, ok := wf.Data.(Resumer); ok {
		return p.Resume(ctx, ap, c, wfs, wf, a)
	}
	if !a.Approved {
		return ap.reject(c, wfs, wf, a)
	}
	always := a.Always
	keys := audit.Keys(wf.Args)
	decision := audit.Approved
	if wf.Type == ApprovalIntegrity {
		wfs.Finish(wf)
		c.Note(audit.Entry{Tool: wf.Tool, Decision: audit.Approved, WorkflowID: wf.ID, Reason: "integrity change approved", ArgKeys: keys})
		return ap.Integrity.ApproveIntegrity(ctx, c, wfs, wf)
	}
	if wf.Type == ApprovalToolChange {
		// "always" adds nothing: what is accepted is pinned either way,
		// and the tool's own permission is not what was asked.
		wfs.Finish(wf)
		return ap.ToolChanges.AcceptToolChange(ctx, c, wfs, wf)
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
		return ap.run(ctx, c, wf, decision)
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
	return ap.run(ctx, c, wf, decision)
}

// reject ends a workflow the person said no to: nothing (more) runs.
// A no in the client's dialog is final, and the refusal says who
// answered.
func (ap *Approver) reject(c *Call, wfs *Workflows, wf *Workflow, a Answer) Result {
	wfs.Finish(wf)
	c.Note(audit.Entry{Tool: wf.Tool, Decision: audit.Rejected, WorkflowID: wf.ID, ArgKeys: audit.Keys(wf.Args)})
	res := Result{
		Text:       fmt.Sprintf("Rejected: %s.", notRun(wf)),
		Structured: map[string]any{"status": "rejected", "workflow_id": wf.ID, "tool": wf.Tool},
		IsError:    true,
	}
	if a.Declined != "" {
		res.Text = fmt.Sprintf("Rejected: %s: %s. This is final; a continue_workflow for it is refused.", notRun(wf), a.Declined)
		res.Cause = errDeclined
		// Some clients (codex) give the model the structured result
		// only: it says who answered too.
		res.Structured.(map[string]any)["reason"] = a.Declined
	}
	return res
}

// run runs the call of an approved workflow through Execute: wf's tool
// with wf's arguments and pattern, asked by c (the answering call, whose
// request, client and workflows it keeps), noted on c with what let it
// through.
func (ap *Approver) run(ctx context.Context, c *Call, wf *Workflow, decision string) Result {
	again := &call.Call{Req: c.Req, Tool: wf.Tool, Args: wf.Args, Pattern: wf.Pattern, Began: c.Began, UpFront: c.UpFront}
	return ap.let(ctx, c, again, decision, wf.ID)
}

// let runs the call run (c itself, or the call of c's answer) through
// Execute and notes its outcome on c with what let it through: the
// execute step notes a call that ran as allowed, with no workflow; one a
// person let through is approved (or always) in workflow id. An entry
// that names its own workflow (a new approval the run opened) or another
// outcome (failed, denied, path_blocked) keeps it.
func (ap *Approver) let(ctx context.Context, c, run *Call, decision, id string) Result {
	res := ap.Execute.Call(ctx, run)
	if e, ok := run.Noted(); ok {
		if e.WorkflowID == "" {
			e.WorkflowID = id
			if e.Decision == audit.Allowed {
				e.Decision = decision
			}
		}
		c.Note(e)
	}
	return res
}
