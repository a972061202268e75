package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/jsonrpc"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/upstream"
)

// pooledExec runs the tools of one configured stdio server in its
// pooled, long-lived container (internal/upstream).
type pooledExec struct {
	sb  *sandbox
	srv *server
}

func (e pooledExec) Run(ctx context.Context, c *Call, def toolbox.Tool, args map[string]any) Result {
	if fwd := c.Req.Forward; fwd.On() {
		return callServer(ctx, c, e.sb, e.srv, def, forwarded{up: e.srv.up, fwd: fwd})
	}
	return callServer(ctx, c, e.sb, e.srv, def, decoded{args: args, call: e.srv.up.Call})
}

// serverCall is one tools/call of a server, in the container its
// executor chooses.
type serverCall func(ctx context.Context, tool string, args json.RawMessage, progressToken any, relay upstream.Relay) (*mcp.CallToolResult, error)

// toServer is how a call goes to a server: its arguments decoded
// (decoded), or as they came on the fast path (forwarded).
type toServer interface {
	// starts says the call may start the server's container, whose
	// environment is then set first.
	starts() bool
	send(ctx context.Context, tool string, req Request) (Result, error)
}

// decoded sends args, decoded, through call; the result is decoded too.
type decoded struct {
	args map[string]any
	call serverCall
}

func (d decoded) starts() bool { return true }

func (d decoded) send(ctx context.Context, tool string, req Request) (Result, error) {
	raw, _ := json.Marshal(d.args)
	res, err := d.call(ctx, tool, raw, req.ProgressToken, req.Relay)
	if err != nil {
		return Result{}, err
	}
	return Result{Text: joinText(res), Structured: res.StructuredContent, IsError: res.IsError, Upstream: res}, nil
}

// forwarded is the fast path: the caller's arguments go to the server as
// they came, and its result comes back as it went (Result.Raw), never
// decoded.
type forwarded struct {
	up  *upstream.Server
	fwd *ForwardCall
}

// starts: the environment matters when the container starts; a running
// server keeps the one it started with.
func (f forwarded) starts() bool { return !f.up.Running() }

func (f forwarded) send(ctx context.Context, tool string, req Request) (Result, error) {
	args, token, progress, answer := f.fwd.Parts()
	res, sent, err := f.up.Forward(ctx, tool, args, token, progress, answer, req.Relay)
	if err != nil {
		return Result{}, err
	}
	f.fwd.SetAnswered(sent)
	return Result{Raw: res, IsError: string(jsonrpc.Member(res, "isError")) == "true"}, nil
}

// callServer puts an allowed call to srv the way to says, within the
// policy's timeout, and words its failures.
func callServer(ctx context.Context, c *Call, sb *sandbox, srv *server, def toolbox.Tool, to toServer) Result {
	if to.starts() {
		if err := srv.prepare(sb); err != nil {
			return errorResult(err)
		}
	}
	parent := ctx
	if t := sb.policy().Timeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeDuration(t))
		defer cancel()
	}
	_, tool, _ := strings.Cut(def.Name, ":")
	res, err := to.send(ctx, tool, c.Req)
	if err != nil {
		return serverCallError(sb, def, err, parent)
	}
	return res
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

func joinText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}
