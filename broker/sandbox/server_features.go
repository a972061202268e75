package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/pml-dev/pml/broker/call"
)

// FeatureExec is an executor that also answers a server's prompts,
// resources and completions (a call.Request of another Kind than a
// tool call): the execute step dispatches those to Serve.
type FeatureExec interface {
	Serve(ctx context.Context, c *call.Call) call.Result
}

// methodOf is the MCP method a request of kind k makes of the server.
func methodOf(k call.Kind) string {
	switch k {
	case call.KindPrompt:
		return "prompts/get"
	case call.KindResource:
		return "resources/read"
	case call.KindSubscribe:
		return "resources/subscribe"
	case call.KindUnsubscribe:
		return "resources/unsubscribe"
	case call.KindCompletion:
		return "completion/complete"
	}
	return ""
}

// Serve puts an allowed request of another kind than a tool call to the
// server's pooled session, within the policy's timeout.
func (e PooledExec) Serve(ctx context.Context, c *call.Call) call.Result {
	method := methodOf(c.Req.Kind)
	if method == "" {
		return call.ResultFor(fmt.Errorf("%w: %s is not a request pml passes to a server", call.ErrInvalidInput, c.Req.Kind))
	}
	if err := e.srv.Prepare(); err != nil {
		return call.ResultFor(err)
	}
	if t := e.sb.Policy().Timeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(t))
		defer cancel()
	}
	res, err := e.srv.Session().Request(ctx, method, c.Req.Args, c.Req.Relay)
	if err != nil {
		return call.ResultFor(fmt.Errorf("%s: %w", c.Tool, err))
	}
	return call.Result{Reply: res}
}

// Serve: a per-call server keeps nothing between calls, so there is no
// session whose prompts or resources pml could list and then serve.
func (e PerCallExec) Serve(ctx context.Context, c *call.Call) call.Result {
	return call.ResultFor(fmt.Errorf("%w: %s runs each call in a container of its own (lifetime per_call), and pml serves prompts, resources and completions only of servers whose container is pooled", call.ErrNotFound, e.srv.Name()))
}
