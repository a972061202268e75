package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/jsonrpc"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/upstream"
)

// callInfo travels in a call's context from the MCP layer to a server
// tool: where progress, log messages and server requests go.
type callInfo struct {
	relay         upstream.Relay
	progressToken any
	// fwd, when set, asks a pooled server's executor to forward the call
	// as bytes (mcpserve/fastpath.go).
	fwd *ForwardCall
}

type callInfoKey struct{}

func withCallInfo(ctx context.Context, ci callInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, ci)
}

// pooledExec runs the tools of one configured stdio server in its
// pooled, long-lived container (internal/upstream).
type pooledExec struct {
	sb  *sandbox
	srv *tl.Server
}

func (e pooledExec) Run(ctx context.Context, def toolbox.Tool, args map[string]any) Result {
	if ci, _ := ctx.Value(callInfoKey{}).(callInfo); ci.fwd.on() {
		return forwardServer(ctx, e.sb, e.srv, def, ci.fwd)
	}
	return callServer(ctx, e.sb, e.srv, def, args, e.srv.Up.Call)
}

// serverCall is one tools/call of a server, in the container its
// executor chooses.
type serverCall func(ctx context.Context, tool string, args json.RawMessage, progressToken any, relay upstream.Relay) (*mcp.CallToolResult, error)

// callServer forwards an allowed call to srv through call, within the
// policy's timeout, and words its failures.
func callServer(ctx context.Context, sb *sandbox, srv *tl.Server, def toolbox.Tool, args map[string]any, call serverCall) Result {
	if err := srv.Prepare(sb.grants, sb.envFor); err != nil {
		return errorResult(err)
	}
	ci, _ := ctx.Value(callInfoKey{}).(callInfo)
	parent := ctx
	if t := sb.policy().Timeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeDuration(t))
		defer cancel()
	}
	raw, _ := json.Marshal(args)
	_, tool, _ := strings.Cut(def.Name, ":")
	res, err := call(ctx, tool, raw, ci.progressToken, ci.relay)
	if err != nil {
		return serverCallError(sb, def, err, parent)
	}
	return Result{Text: joinText(res), Structured: res.StructuredContent, IsError: res.IsError, Upstream: res}
}

// serverCallError words a failed call to a server; parent is the call's
// context before sandbox.timeout bounded it (whose deadline passed).
func serverCallError(sb *sandbox, def toolbox.Tool, err error, parent context.Context) Result {
	switch {
	case errors.Is(err, context.DeadlineExceeded) && errors.Is(parent.Err(), context.DeadlineExceeded):
		return errorResult(fmt.Errorf("%s was stopped: %s; the server was told to cancel it", def.Name, callerDeadline))
	case errors.Is(err, context.DeadlineExceeded) && sb.policy().Timeout <= 0:
		return errorResult(fmt.Errorf("%s was stopped by a deadline (the server was told to cancel it)", def.Name))
	case errors.Is(err, context.DeadlineExceeded):
		return errorResult(fmt.Errorf("%s timed out after %s (the server was told to cancel it; %s)", def.Name, timeDuration(sb.policy().Timeout), raiseTimeout()))
	case errors.Is(err, context.Canceled):
		return errorResult(fmt.Errorf("%s was cancelled", def.Name))
	case errors.Is(err, container.ErrUnavailable), errors.Is(err, container.ErrImageMissing):
		return errorResult(fmt.Errorf("%w: %w", ErrUnavailable, err))
	}
	return errorResult(err)
}

// forwardServer is callServer on the fast path: the caller's arguments go
// to the server as they came, and its result comes back as it went
// (Result.raw), never decoded.
func forwardServer(ctx context.Context, sb *sandbox, srv *tl.Server, def toolbox.Tool, fwd *ForwardCall) Result {
	// The environment matters when the container starts: a running
	// server keeps the one it started with.
	if !srv.Up.Running() {
		if err := srv.Prepare(sb.grants, sb.envFor); err != nil {
			return errorResult(err)
		}
	}
	ci, _ := ctx.Value(callInfoKey{}).(callInfo)
	parent := ctx
	if t := sb.policy().Timeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeDuration(t))
		defer cancel()
	}
	_, tool, _ := strings.Cut(def.Name, ":")
	res, sent, err := srv.Up.Forward(ctx, tool, fwd.args, fwd.token, fwd.progress, fwd.answer, ci.relay)
	if err != nil {
		return serverCallError(sb, def, err, parent)
	}
	fwd.answered = sent
	return Result{Raw: res, IsError: string(jsonrpc.Member(res, "isError")) == "true"}
}

func joinText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}
