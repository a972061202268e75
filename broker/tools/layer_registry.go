package tools

import (
	"context"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/audit"
)

// RegistryLayer fetches a tool that ResolveLayer marked as a registry
// name, checked against the lockfile (registry.go). An entry
// whose integrity changed since it was locked is put to a person before
// anything of it runs (ApprovalIntegrity); abort keeps the old version.
// C is the registry's record of such a change (IntegrityChange):
// the layer only hands it to the workflow, whose answer applies it.
type RegistryLayer[C any] struct {
	Next     call.Handler
	Registry Fetcher[C]
	Ask      Asking
}

// Fetcher loads a registry tool (Registry.Resolve): a non-nil change is
// an entry whose integrity changed, and nothing of it is callable yet.
type Fetcher[C any] interface {
	Resolve(ctx context.Context, tool string) (change *C, err error)
}

// Asking is what a layer that opens an approval uses: whether the call
// must be refused for want of the client's dialog, the approval's text,
// and putting it to the person (package approve's Approver).
type Asking interface {
	NeedsDialog(c *call.Call, tool, pattern string, args map[string]any) (call.Result, bool)
	ApprovalFor(wf *workflow.Workflow) workflow.Approval
	AskInDialog(ctx context.Context, c *call.Call, wf *workflow.Workflow, a workflow.Approval) call.Result
}

func (l RegistryLayer[C]) Call(ctx context.Context, c *call.Call) call.Result {
	if !c.FromRegistry {
		return l.Next.Call(ctx, c)
	}
	rctx, span := call.SpanStep(ctx, "registry")
	change, err := l.Registry.Resolve(rctx, c.Tool)
	span.End()
	if err != nil {
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: "registry", ArgKeys: audit.Keys(c.Args)})
		return call.ResultFor(err)
	}
	if change == nil {
		return l.Next.Call(ctx, c)
	}
	c.DecodeArgs()
	if res, refused := l.Ask.NeedsDialog(c, c.Tool, c.Pattern, c.Args); refused {
		return res
	}
	wf := c.Req.Workflows.Create(workflow.ApprovalIntegrity, c.Tool, c.Args, c.Pattern)
	wf.Data = change
	c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Asked, Pattern: c.Pattern, WorkflowID: wf.ID, Reason: "integrity changed", ArgKeys: audit.Keys(c.Args)})
	return l.Ask.AskInDialog(ctx, c, wf, l.Ask.ApprovalFor(wf))
}
