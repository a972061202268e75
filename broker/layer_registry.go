package broker

import (
	"context"

	"github.com/pml-dev/pml/internal/audit"
)

// registryLayer fetches a tool that resolveLayer marked as a registry
// name, checked against the lockfile (registry.go). An entry whose
// integrity changed since it was locked is put to a person before
// anything of it runs (ApprovalIntegrity); abort keeps the old version.
type registryLayer struct {
	b    *Broker
	next Handler
}

func (l registryLayer) Call(ctx context.Context, c *Call) Result {
	if !c.FromRegistry {
		return l.next.Call(ctx, c)
	}
	b := l.b
	rctx, span := spanStep(ctx, "registry")
	change, err := b.resolveFromRegistry(rctx, c.Tool)
	span.End()
	if err != nil {
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: "registry", ArgKeys: audit.Keys(c.Args)})
		return errorResult(err)
	}
	if change == nil {
		return l.next.Call(ctx, c)
	}
	c.DecodeArgs()
	if res, refused := b.needsDialog(c, c.Tool, c.Pattern, c.Args); refused {
		return res
	}
	wf := c.Req.Workflows.Create(ApprovalIntegrity, c.Tool, c.Args, c.Pattern)
	wf.Data = change
	c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Asked, Pattern: c.Pattern, WorkflowID: wf.ID, Reason: "integrity changed", ArgKeys: audit.Keys(c.Args)})
	return b.askInDialog(ctx, c, wf, b.approvalFor(wf))
}
