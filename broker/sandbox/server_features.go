package sandbox

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/upstream"
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

// Serve puts an allowed prompt get, resource read or completion to a
// per-call server in a container of its own, as a tool call is (nothing
// of one request reaches the next). A subscription is refused: no
// container of the server lives on to tell of an update.
func (e PerCallExec) Serve(ctx context.Context, c *call.Call) call.Result {
	method := methodOf(c.Req.Kind)
	if method == "" {
		return call.ResultFor(fmt.Errorf("%w: %s is not a request pml passes to a server", call.ErrInvalidInput, c.Req.Kind))
	}
	if c.Req.Kind == call.KindSubscribe || c.Req.Kind == call.KindUnsubscribe {
		return call.ResultFor(fmt.Errorf("%w: %s runs each request in a container of its own (lifetime per_call), so no container lives on to tell of an update: subscribe to a pooled server's resources, or read this one again", call.ErrInvalidInput, e.srv.Name()))
	}
	if err := e.srv.Prepare(); err != nil {
		return call.ResultFor(err)
	}
	if t := e.sb.Policy().Timeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(t))
		defer cancel()
	}
	var res any
	err := e.fresh(ctx, func(acquire upstream.Starter, spec container.Spec, roots []*mcp.Root) error {
		var err error
		res, err = e.srv.Session().RequestOnce(ctx, acquire, spec, roots, method, c.Req.Args, c.Req.Relay)
		return err
	})
	if err != nil {
		return call.ResultFor(fmt.Errorf("%s: %w", c.Tool, err))
	}
	return call.Result{Reply: res}
}
