package broker

import (
	"context"

	"github.com/pml-dev/pml/broker/call"
	sbx "github.com/pml-dev/pml/broker/sandbox"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/audit"
)

// serveFeature is the execute step of a request of another kind than a
// tool call (a prompt, a resource read or subscription, a completion):
// allowed by the same permissions and approvals, it goes to its server's
// executor (sandbox.FeatureExec), and is noted for the audit under its
// permission name.
func (b *Broker) serveFeature(ctx context.Context, c *call.Call) call.Result {
	exec, err := b.srv.FeatureExec(c.Tool)
	if err == nil {
		if _, ok := exec.(sbx.FeatureExec); !ok {
			err = tl.ErrNoFeatures
		}
	}
	if err != nil {
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Pattern: c.Pattern, Reason: "not served", ArgKeys: audit.Keys(c.Args)})
		return errorResult(err)
	}
	ectx, span := spanStep(ctx, "execute")
	res := exec.(sbx.FeatureExec).Serve(ectx, c)
	span.End()
	status := "ok"
	if res.IsError {
		status = "error"
		b.log.Debug().Str("tool", c.Tool).Str("error", res.Text).Msg("the server's answer is an error")
	}
	c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Allowed, Pattern: c.Pattern, ExitStatus: status, ArgKeys: audit.Keys(c.Args)})
	return res
}
