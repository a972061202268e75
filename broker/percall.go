package broker

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/container"
)

// callPerCall runs one tools/call of a server with "lifetime": "per_call"
// in a container of its own, which is killed and removed afterwards:
// nothing of one call (memory, files in /tmp, processes) reaches the next.
// The container comes pre-started from the pool when one is ready, its
// server waiting on stdin, so the MCP initialize handshake is the only
// cost on top of the call itself.
func (b *Broker) callPerCall(ctx context.Context, srv *server, tool string, args json.RawMessage, ci callInfo) (*mcp.CallToolResult, error) {
	name := srv.cfg.Name
	env, err := b.envFor(srv.cfg)
	if err != nil {
		return nil, err
	}
	// The tool list may have come from a long-lived container
	// (loadServer). Calls never go there, so it has no further use.
	if srv.up.Running() {
		srv.up.Stop()
	}
	spec := b.serverSpec(srv.cfg)
	spec.Env = env
	spec.Labels = b.labels("pool:mcp:" + name)
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
		l, err := b.pool.Acquire(ctx, spec, streams)
		if err != nil {
			return nil, err
		}
		lease = l
		return l, nil
	}
	// The server's upstream runs the session: it attributes and rate
	// limits the server's requests to the person (asks.go) as it does for
	// the pooled container.
	res, err := srv.up.CallOnce(ctx, acquire, spec, b.serverRoots(srv.cfg), tool, args, ci.progressToken, ci.relay)
	if err == nil {
		b.log.Debug().Str("server", name).Str("container", lease.ID()).Bool("warm", lease.Warm).Msg("per-call server call")
	}
	return res, err
}
