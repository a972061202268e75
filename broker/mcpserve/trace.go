package mcpserve

import (
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/pml-dev/pml/internal/telemetry"
	"github.com/pml-dev/pml/internal/wirename"
)

// traceRequests gives every MCP request pml answers its server span (the
// OpenTelemetry conventions for MCP), continuing a trace the client sent
// in params._meta. It is the outermost receiving middleware, so the span
// covers everything pml does for the request; the steps of a tool call
// add their own spans below it (spanStep). Off, it is one atomic load.
func traceRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !telemetry.Active() {
			return next(ctx, method, req)
		}
		began := time.Now()
		r := telemetry.Request{Method: method}
		var meta map[string]any
		// GetParams can return an interface holding a nil pointer (a
		// request sent without params): check the pointer, not the
		// interface, or a paramless ping ends the process.
		if p := req.GetParams(); p != nil && !telemetry.IsNilParams(p) {
			meta = p.GetMeta()
		}
		if cr, ok := req.(*mcp.CallToolRequest); ok && cr.Params != nil {
			r.Tool = cr.Params.Name
			if n, ok := wirename.Decode(cr.Params.Name); ok && n != r.Tool {
				r.Name = n
			}
		}
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
			r.SessionID = ss.ID()
			if ip := ss.InitializeParams(); ip != nil {
				r.Protocol = ip.ProtocolVersion
			}
		}
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil && method == "initialize" {
			// The session's duration (mcp.server.session.duration), from
			// its initialize to its end.
			go func() {
				_ = ss.Wait()
				proto := ""
				if ip := ss.InitializeParams(); ip != nil {
					proto = ip.ProtocolVersion
				}
				telemetry.SessionEnded(began, proto)
			}()
		}
		ctx, span := telemetry.StartServer(ctx, r, meta)
		res, err := next(ctx, method, req)
		toolErr := false
		if cr, ok := res.(*mcp.CallToolResult); ok && cr != nil {
			toolErr = cr.IsError
		}
		telemetry.End(ctx, span, r, true, began, toolErr, err)
		return res, err
	}
}

// traceForwarded gives a call the stdio fast path takes (fastpath.go) what
// traceRequests gives a tools/call on the go-sdk's path: its server span,
// by the same name and attributes, continuing the trace in the client's
// _meta (meta, raw), and the conventions' server duration. Its end ends
// them with the call's outcome. Off, it is one atomic load and the
// forwardTrace's on is false.
func traceForwarded(ctx context.Context, ss *mcp.ServerSession, wire string, meta json.RawMessage) (context.Context, forwardTrace) {
	if !telemetry.Active() {
		return ctx, forwardTrace{}
	}
	// The span is named by the method and the tool; the rest of the
	// request (its attributes) is read when it ends, after the answer.
	t := forwardTrace{on: true, began: time.Now(), ss: ss, r: telemetry.Request{Method: "tools/call", Tool: wire}}
	ctx, t.span = telemetry.StartServer(telemetry.FromMetaJSON(ctx, meta), t.r, nil)
	t.ctx = ctx
	return ctx, t
}

// forwardTrace is a forwarded call's server span and what its duration
// is recorded by: a value, not a closure (which would be an allocation
// on each traced call).
type forwardTrace struct {
	on    bool
	ctx   context.Context
	span  trace.Span
	ss    *mcp.ServerSession
	r     telemetry.Request
	began time.Time
}

// end ends the span and records the duration, with the call's outcome.
func (t *forwardTrace) end(toolErr bool, err error) {
	if !t.on {
		return
	}
	t.r.SessionID = t.ss.ID()
	if ip := t.ss.InitializeParams(); ip != nil {
		t.r.Protocol = ip.ProtocolVersion
	}
	if n, ok := wirename.Decode(t.r.Tool); ok && n != t.r.Tool {
		t.r.Name = n
	}
	telemetry.End(t.ctx, t.span, t.r, true, t.began, toolErr, err)
}
