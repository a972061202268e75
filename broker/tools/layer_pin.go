package tools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/toolpin"
)

// ToolPins puts a held tool (one whose definition drifted from its pin:
// Table.Held) to a person before anything of it runs, and pins what they
// accepted (package approve's ToolChanges).
type ToolPins struct {
	Table *Table
	// Fresh registers what a server lists now before its call is decided
	// (Servers.Fresh); nil: the table as it is.
	Fresh func(ctx context.Context, tool string)
	Ask   PinAsking
	// Unlisted refuses a call of a tool its server lists without it that
	// the policy does not name exactly (Servers.CheckUnlisted); nil:
	// left to the execute step.
	Unlisted func(tool string) error
	// BelowAudit is the request path below the audit layer: an accepted
	// call runs through it again (permissions, schema, approvals), never
	// straight to the execute step.
	BelowAudit call.Handler
}

// PinAsking is what the pin layer uses of the approver: Asking and a
// workflow's generic approval.
type PinAsking interface {
	Asking
	Approval(wf *workflow.Workflow) workflow.Approval
}

// PinHold is a held tool's workflow payload: the change as shown.
type PinHold struct {
	Drift *toolpin.Drift
}

// PinLayer is the pin step of the request path (after permit and
// registry, before schema): a held tool's call opens an approval of type
// tool_change that shows what changed; nothing runs until it is accepted.
type PinLayer struct {
	Next call.Handler
	Pins *ToolPins
}

func (l PinLayer) Call(ctx context.Context, c *call.Call) call.Result {
	if l.Pins == nil || l.Pins.Table == nil {
		return l.Next.Call(ctx, c)
	}
	if c.Req.Kind == call.KindPrompt {
		return l.prompt(ctx, c)
	}
	if c.Req.Kind != call.KindTool {
		return l.Next.Call(ctx, c)
	}
	if l.Pins.Fresh != nil {
		// Its span (pml.pin) only when it lists the server's tools: a
		// server already listed costs a warm call nothing here.
		l.Pins.Fresh(ctx, c.Tool)
	}
	dr := l.Pins.Table.Held(c.Tool)
	if dr == nil {
		if l.Pins.Unlisted != nil {
			// A tool its server does not list has no definition to pin:
			// it goes on only when the policy names it exactly
			// (unlisted.go), refused here before anything is asked.
			if err := l.Pins.Unlisted(c.Tool); err != nil {
				c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Pattern: c.Pattern, Reason: "no such tool: not listed by its server, and no exact entry of permissions.allow names it"})
				return call.ResultFor(err)
			}
		}
		return l.Next.Call(ctx, c)
	}
	c.DecodeArgs()
	if res, refused := l.Pins.Ask.NeedsDialog(c, c.Tool, c.Pattern, c.Args); refused {
		return res
	}
	wf := c.Req.Workflows.Create(workflow.ApprovalToolChange, c.Tool, c.Args, c.Pattern)
	wf.Data = &PinHold{Drift: dr}
	c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Asked, Pattern: c.Pattern, WorkflowID: wf.ID, Reason: "tool definition " + string(dr.State) + ": held", ArgKeys: audit.Keys(c.Args)})
	return l.Pins.Ask.AskInDialog(ctx, c, wf, l.Pins.ToolChangeApproval(wf))
}

// prompt refuses the get of a held prompt, saying what changed and how
// to accept it: a prompt's answer is messages for the model, with no
// place for an approval's question.
func (l PinLayer) prompt(ctx context.Context, c *call.Call) call.Result {
	dr := l.Pins.Table.HeldPrompt(c.Tool)
	if dr == nil {
		return l.Next.Call(ctx, c)
	}
	c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Denied, Pattern: c.Pattern, Reason: "prompt definition " + string(dr.State) + ": held"})
	return call.ResultFor(fmt.Errorf("%w: pml holds %s: %s; nothing was sent to the server. Review the change (pml lock shows its diff) and accept it with `pml lock --accept %s`, then ask again",
		call.ErrNotTrusted, termsafe.Quote(c.Tool, 200), dr.Summary(), c.Tool))
}

// ToolChangeApproval describes a held tool's approval: what changed, as
// a short diff, and that continue pins exactly that.
func (p *ToolPins) ToolChangeApproval(wf *workflow.Workflow) workflow.Approval {
	a := p.Ask.Approval(wf)
	h, _ := wf.Data.(*PinHold)
	if h == nil || h.Drift == nil {
		return a
	}
	dr := h.Drift
	a.Description = fmt.Sprintf("pml holds %s: %s. Review what it says now:\n%s"+
		"Continue accepts this definition (pml pins it for this workspace) and runs the call; abort runs nothing and the tool stays held.",
		termsafe.Quote(wf.Tool, 200), dr.Summary(), dr.Diff())
	a.Options = []string{"continue", "abort"}
	a.Context = map[string]any{
		"change":  string(dr.State),
		"changed": dr.Parts(),
		"digest":  dr.Digest,
		"diff":    dr.Diff(),
	}
	return a
}

// AcceptToolChange pins the definition the approval showed and runs the
// call again through the path below the audit layer.
func (p *ToolPins) AcceptToolChange(ctx context.Context, c *call.Call, wfs *workflow.Workflows, wf *workflow.Workflow) call.Result {
	h, _ := wf.Data.(*PinHold)
	if h == nil || h.Drift == nil {
		return call.ResultFor(fmt.Errorf("workflow %s has no tool change attached", wf.ID))
	}
	keys := audit.Keys(wf.Args)
	if err := p.Table.Accept(wf.Tool, h.Drift.Digest); err != nil {
		c.Note(audit.Entry{Tool: wf.Tool, Decision: audit.Failed, WorkflowID: wf.ID, Reason: "tool change not accepted", ArgKeys: keys})
		return call.ResultFor(fmt.Errorf("%v; nothing was run", err))
	}
	args, _ := json.Marshal(wf.Args)
	again := call.NewCall(call.Request{Tool: wf.Tool, Args: args, Workflows: wfs}.Within(c.Req))
	again.Began = c.Began
	res := p.BelowAudit.Call(ctx, again)
	c.Note(audit.Entry{Tool: wf.Tool, Decision: audit.Approved, WorkflowID: wf.ID, Reason: "tool change accepted", ArgKeys: keys})
	if e, ok := again.Noted(); ok {
		if e.WorkflowID == "" {
			e.WorkflowID = wf.ID
		}
		if e.Reason == "" {
			e.Reason = "tool change accepted"
		}
		c.Note(e)
	}
	return res
}
