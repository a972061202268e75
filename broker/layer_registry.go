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
	next Handler
	// fetch loads a registry tool (registrySide.resolveFromRegistry); a
	// non-nil change is an entry whose integrity changed.
	fetch func(ctx context.Context, tool string) (*integrityChange, error)
	ask   asking
}

func (l registryLayer) Call(ctx context.Context, c *Call) Result {
	if !c.FromRegistry {
		return l.next.Call(ctx, c)
	}
	rctx, span := spanStep(ctx, "registry")
	change, err := l.fetch(rctx, c.Tool)
	span.End()
	if err != nil {
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: "registry", ArgKeys: audit.Keys(c.Args)})
		return errorResult(err)
	}
	if change == nil {
		return l.next.Call(ctx, c)
	}
	c.DecodeArgs()
	if res, refused := l.ask.needsDialog(c, c.Tool, c.Pattern, c.Args); refused {
		return res
	}
	wf := c.Req.Workflows.Create(ApprovalIntegrity, c.Tool, c.Args, c.Pattern)
	wf.Data = change
	c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Asked, Pattern: c.Pattern, WorkflowID: wf.ID, Reason: "integrity changed", ArgKeys: audit.Keys(c.Args)})
	return l.ask.inDialog(ctx, c, wf, l.ask.approval(wf))
}
