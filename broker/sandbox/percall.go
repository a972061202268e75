package sandbox

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

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
	var res *mcp.CallToolResult
	err := e.fresh(ctx, func(acquire upstream.Starter, spec container.Spec, roots []*mcp.Root) error {
		var err error
		// The server's upstream runs the session: it attributes the
		// server's requests to the person and holds them to the call's
		// budget (asks.go) as it does for the pooled container.
		res, err = e.srv.Session().CallOnce(ctx, acquire, spec, roots, tool, args, meta, progressToken, relay)
		return err
	})
	return res, err
}

// fresh gives run a container of the server's own for one request (from
// the pool when one is ready), released when run returns.
func (e PerCallExec) fresh(ctx context.Context, run func(acquire upstream.Starter, spec container.Spec, roots []*mcp.Root) error) error {
	srv, up := e.srv, e.srv.Session()
	name := srv.Name()
	env, err := srv.Env()
	if err != nil {
		return err
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
	err = run(acquire, spec, roots)
	if err == nil && lease != nil {
		e.sb.Log.Debug().Str("server", name).Str("container", lease.ID()).Bool("warm", lease.Warm).Msg("per-call server request")
	}
	return err
}
