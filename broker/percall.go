package broker

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/upstream"
)

// perCallExec runs the tools of a server with "lifetime": "per_call":
// each call in a container of its own, which is killed and removed
// afterwards: nothing of one call (memory, files in /tmp, processes)
// reaches the next.
type perCallExec struct {
	sb   *sandbox
	deps *deps.Store
	srv  *tl.Server
}

func (e perCallExec) Run(ctx context.Context, def toolbox.Tool, args map[string]any) Result {
	return callServer(ctx, e.sb, e.srv, def, args, e.callOnce)
}

// callOnce runs one tools/call in a fresh container. It comes pre-started
// from the pool when one is ready, its server waiting on stdin, so the
// MCP initialize handshake is the only cost on top of the call itself.
func (e perCallExec) callOnce(ctx context.Context, tool string, args json.RawMessage, progressToken any, relay upstream.Relay) (*mcp.CallToolResult, error) {
	srv := e.srv
	name := srv.Cfg.Name
	env, err := e.sb.envFor(srv.Cfg)
	if err != nil {
		return nil, err
	}
	// The tool list may have come from a long-lived container
	// (loadServer). Calls never go there, so it has no further use.
	if srv.Up.Running() {
		srv.Up.Stop()
	}
	spec := serverSpec(e.sb, e.deps, srv.Cfg)
	spec.Env = env
	spec.Labels = e.sb.labels("pool:mcp:" + name)
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
		l, err := e.sb.pool.Acquire(ctx, spec, streams)
		if err != nil {
			return nil, err
		}
		lease = l
		return l, nil
	}
	// The server's upstream runs the session: it attributes and rate
	// limits the server's requests to the person (asks.go) as it does for
	// the pooled container.
	res, err := srv.Up.CallOnce(ctx, acquire, spec, tl.ServerRoots(e.sb.ws, srv.Cfg), tool, args, progressToken, relay)
	if err == nil {
		e.sb.log.Debug().Str("server", name).Str("container", lease.ID()).Bool("warm", lease.Warm).Msg("per-call server call")
	}
	return res, err
}
