package sandbox

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/upstream"
)

// PerCallExec runs the tools of a server with "lifetime": "per_call":
// each call in a container of its own, which is killed and removed
// afterwards: nothing of one call (memory, files in /tmp, processes)
// reaches the next.
type PerCallExec struct {
	sb  *Sandbox
	srv Server
}

// NewPerCallExec is srv's executor on sb when each call has a container
// of its own.
func NewPerCallExec(sb *Sandbox, srv Server) PerCallExec { return PerCallExec{sb: sb, srv: srv} }

func (e PerCallExec) Run(ctx context.Context, c *call.Call, def toolbox.Tool, args map[string]any) call.Result {
	return callServer(ctx, c, e.sb, e.srv, def, decoded{args: args, call: e.callOnce})
}

// callOnce runs one tools/call in a fresh container. It comes pre-started
// from the pool when one is ready, its server waiting on stdin, so the
// MCP initialize handshake is the only cost on top of the call itself.
func (e PerCallExec) callOnce(ctx context.Context, tool string, args json.RawMessage, meta map[string]any, progressToken any, relay upstream.Relay) (*mcp.CallToolResult, error) {
	srv, up := e.srv, e.srv.Session()
	name := srv.Name()
	env, err := srv.Env()
	if err != nil {
		return nil, err
	}
	// The tool list may have come from a long-lived container
	// (loadServer). Calls never go there, so it has no further use.
	if up.Running() {
		up.Stop()
	}
	spec, roots := srv.Container()
	spec.Env = env
	spec.Labels = e.sb.Labels("pool:mcp:" + name)
	// On the direct path the shim stays beside the server and ends the
	// container when pml is gone (internal/shim): a pre-started server
	// that ignores the end of its input cannot outlive pml.
	spec.DirectStdio = true

	var lease *container.Lease
	defer func() {
		if lease != nil {
			lease.Release()
		}
	}()
	acquire := func(ctx context.Context, spec container.Spec, streams container.Streams) (container.Process, error) {
		l, err := e.sb.Pool.Acquire(ctx, spec, streams)
		if err != nil {
			return nil, err
		}
		lease = l
		return l, nil
	}
	// The server's upstream runs the session: it attributes and rate
	// limits the server's requests to the person (asks.go) as it does for
	// the pooled container.
	res, err := up.CallOnce(ctx, acquire, spec, roots, tool, args, meta, progressToken, relay)
	if err == nil {
		e.sb.Log.Debug().Str("server", name).Str("container", lease.ID()).Bool("warm", lease.Warm).Msg("per-call server call")
	}
	return res, err
}
