package sandbox

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/jsonrpc"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/upstream"
)

// Server is one configured stdio server as its executors reach it
// (broker's server set gives one per server).
type Server interface {
	// Name is the server's name (mcps.NAME).
	Name() string
	// Session is the server's MCP session (internal/upstream), which
	// runs it in its pooled container or in one per call.
	Session() *upstream.Server
	// Prepare checks what must hold before the server's container may
	// start (a registry server's grant, its environment) and gives the
	// session its environment.
	Prepare() error
	// Env is the environment of a container of the server.
	Env() ([]string, error)
	// Container is the server's container (image, policy, mounts,
	// network) and the roots it is told of.
	Container() (container.Spec, []*mcp.Root)
}

// PooledExec runs the tools of one configured stdio server in its
// pooled, long-lived container (internal/upstream).
type PooledExec struct {
	sb  *Sandbox
	srv Server
}

// NewPooledExec is srv's executor on sb when its container is pooled.
func NewPooledExec(sb *Sandbox, srv Server) PooledExec { return PooledExec{sb: sb, srv: srv} }

func (e PooledExec) Run(ctx context.Context, c *call.Call, def toolbox.Tool, args map[string]any) call.Result {
	up := e.srv.Session()
	if fwd := c.Req.Forward; fwd.On() {
		return callServer(ctx, c, e.sb, e.srv, def, forwarded{up: up, fwd: fwd})
	}
	return callServer(ctx, c, e.sb, e.srv, def, decoded{args: args, call: up.Call})
}

// serverCall is one tools/call of a server, in the container its
// executor chooses.
type serverCall func(ctx context.Context, tool string, args json.RawMessage, meta map[string]any, progressToken any, relay upstream.Relay) (*mcp.CallToolResult, error)

// toServer is how a call goes to a server: its arguments decoded
// (decoded), or as they came on the fast path (forwarded).
type toServer interface {
	// starts says the call may start the server's container, whose
	// environment is then set first.
	starts() bool
	send(ctx context.Context, tool string, req call.Request) (call.Result, error)
}

// decoded sends args, decoded, through call; the result is decoded too.
type decoded struct {
	args map[string]any
	call serverCall
}

func (d decoded) starts() bool { return true }

func (d decoded) send(ctx context.Context, tool string, req call.Request) (call.Result, error) {
	raw, _ := json.Marshal(d.args)
	res, err := d.call(ctx, tool, raw, req.Meta, req.ProgressToken, req.Relay)
	if err != nil {
		return call.Result{}, err
	}
	return call.Result{Text: joinText(res), Structured: res.StructuredContent, IsError: res.IsError, Upstream: res}, nil
}

// forwarded is the fast path: the caller's arguments go to the server as
// they came, and its result comes back as it went (Result.Raw), never
// decoded.
type forwarded struct {
	up  *upstream.Server
	fwd *call.ForwardCall
}

// starts: the environment matters when the container starts; a running
// server keeps the one it started with.
func (f forwarded) starts() bool { return !f.up.Running() }

func (f forwarded) send(ctx context.Context, tool string, req call.Request) (call.Result, error) {
	args, token, progress, answer := f.fwd.Parts()
	res, sent, err := f.up.Forward(ctx, tool, args, f.fwd.Meta(), token, progress, answer, req.Relay)
	if err != nil {
		return call.Result{}, err
	}
	f.fwd.SetAnswered(sent)
	return call.Result{Raw: res, IsError: string(jsonrpc.Member(res, "isError")) == "true"}, nil
}

// callServer puts an allowed call to srv the way to says, within the
// policy's timeout, and words its failures.
func callServer(ctx context.Context, c *call.Call, sb *Sandbox, srv Server, def toolbox.Tool, to toServer) call.Result {
	if to.starts() {
		if err := srv.Prepare(); err != nil {
			return call.ResultFor(err)
		}
	}
	parent := ctx
	if t := sb.Policy().Timeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(t))
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
func serverCallError(sb *Sandbox, def toolbox.Tool, err error, parent context.Context) call.Result {
	var sw *upstream.StartWaitError
	if errors.As(err, &sw) && errors.Is(err, context.DeadlineExceeded) {
		// Nothing reached the server: nothing was told to cancel.
		why := callerDeadline
		if !errors.Is(parent.Err(), context.DeadlineExceeded) {
			why = fmt.Sprintf("its limit of %s (sandbox.timeout) passed", time.Duration(sb.Policy().Timeout))
		}
		return call.ResultFor(fmt.Errorf("%s was stopped: %s before its server had started (the call never reached it; the start goes on within its own bound, %s)", def.Name, why, sw.Bound))
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded) && errors.Is(parent.Err(), context.DeadlineExceeded):
		return call.ResultFor(fmt.Errorf("%s was stopped: %s; the server was told to cancel it", def.Name, callerDeadline))
	case errors.Is(err, context.DeadlineExceeded) && sb.Policy().Timeout <= 0:
		return call.ResultFor(fmt.Errorf("%s was stopped by a deadline (the server was told to cancel it)", def.Name))
	case errors.Is(err, context.DeadlineExceeded):
		return call.ResultFor(fmt.Errorf("%s timed out after %s (the server was told to cancel it; %s)", def.Name, time.Duration(sb.Policy().Timeout), raiseTimeout()))
	case errors.Is(err, context.Canceled):
		return call.ResultFor(fmt.Errorf("%s was cancelled", def.Name))
	case errors.Is(err, container.ErrUnavailable), errors.Is(err, container.ErrImageMissing):
		return call.ResultFor(fmt.Errorf("%w: %w", call.ErrUnavailable, err))
	}
	return call.ResultFor(err)
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
