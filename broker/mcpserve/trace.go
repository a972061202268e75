package mcpserve

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"

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
		var pmlName string
		if cr, ok := req.(*mcp.CallToolRequest); ok && cr.Params != nil {
			r.Tool = cr.Params.Name
			if n, ok := wirename.Decode(cr.Params.Name); ok {
				pmlName = n
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
		if pmlName != "" && pmlName != r.Tool {
			span.SetAttributes(attribute.String("pml.tool", pmlName))
		}
		res, err := next(ctx, method, req)
		toolErr := false
		if cr, ok := res.(*mcp.CallToolResult); ok && cr != nil {
			toolErr = cr.IsError
		}
		telemetry.End(ctx, span, r, true, began, toolErr, err)
		return res, err
	}
}
