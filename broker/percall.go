package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/upstream"
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

	pr, pw := io.Pipe()
	defer pr.Close()
	stderr := upstream.NewRing(64, 16<<10)
	lease, err := b.pool.Acquire(ctx, spec, container.Streams{Stdout: pw, Stderr: stderr})
	if err != nil {
		pw.Close()
		if errors.Is(err, container.ErrImageMissing) {
			return nil, fmt.Errorf("the MCP server %s cannot start: its image %s is not on this host (build or pull it, e.g. `make images` or `pml images pull`): %w", name, spec.Image, container.ErrImageMissing)
		}
		return nil, fmt.Errorf("the MCP server %s cannot start: %w", name, err)
	}
	defer lease.Release()
	exited := make(chan struct{})
	var exit container.Exit
	var exitErr error
	go func() {
		exit, exitErr = lease.Wait(context.Background())
		pw.CloseWithError(io.EOF)
		close(exited)
	}()
	crashed := func(when string) error {
		select {
		case <-exited:
		case <-time.After(2 * time.Second):
			return nil
		}
		msg := fmt.Sprintf("the MCP server %s exited %s", name, when)
		if exitErr == nil {
			msg += fmt.Sprintf(" (exit code %d", exit.Code)
			if exit.OOMKilled {
				msg += ", out of memory"
			}
			msg += ")"
		}
		if tail := stderr.Tail(10); tail != "" {
			msg += "; its last stderr lines:\n" + tail
		}
		return errors.New(msg)
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "pml", Version: "broker"}, perCallClientOptions(srv.up, ci.relay))
	if roots := b.serverRoots(srv.cfg); len(roots) > 0 {
		client.AddRoots(roots...)
	}
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: pr, Writer: lease.Stdin(), MaxLineLength: 64 << 20},
		&mcp.ClientSessionOptions{ProtocolVersion: upstream.ProtocolVersion})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if cerr := crashed("while starting"); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("the MCP server %s failed its initialize handshake: %w", name, err)
	}
	defer cs.Close()

	params := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}}
	if len(args) > 0 && string(args) != "null" {
		params.Arguments = args
	}
	if ci.progressToken != nil && ci.relay != nil {
		// This server serves no one else: the caller's own token is safe.
		params.SetProgressToken(ci.progressToken)
	}
	res, err := cs.CallTool(ctx, params)
	if err == nil {
		b.log.Debug().Str("server", name).Str("container", lease.ID()).Bool("warm", lease.Warm).Msg("per-call server call")
		return res, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if cerr := crashed("during the call"); cerr != nil {
		return nil, cerr
	}
	return nil, fmt.Errorf("the MCP server %s did not answer: %w", name, err)
}

// perCallClientOptions hand what a per-call server sends during its one
// call to the client the call came from; its requests to the person are
// attributed and rate limited by the server's upstream (asks.go).
func perCallClientOptions(up *upstream.Server, relay upstream.Relay) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			if relay != nil {
				relay.Progress(ctx, req.Params)
			}
		},
		LoggingMessageHandler: func(ctx context.Context, req *mcp.LoggingMessageRequest) {
			if relay != nil {
				relay.Log(ctx, req.Params)
			}
		},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return up.Elicit(ctx, relay, req.Params)
		},
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return up.CreateMessage(ctx, relay, req.Params)
		},
	}
}
