package broker

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pml-dev/pml/broker/call"
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

// spanStep starts the span of one step of a call that does work (permit,
// approve, registry, install, execute); end it with span.End. Off, it
// costs one atomic load.
func spanStep(ctx context.Context, step string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return call.SpanStep(ctx, step, attrs...)
}

// tracedAsk gives each question put to a person (an approval through the
// client's dialog) its span, so a trace shows the time the person took
// and the answer. Off, ask is returned as it is.
func tracedAsk(ask func(context.Context, Approval) (string, bool)) func(context.Context, Approval) (string, bool) {
	if ask == nil || !telemetry.Active() {
		return ask
	}
	return func(ctx context.Context, a Approval) (string, bool) {
		ctx, span := spanStep(ctx, "approve", attribute.String("pml.approval.type", string(a.ApprovalType)))
		choice, shown := ask(ctx, a)
		span.SetAttributes(attribute.String("pml.approval.answer", choice), attribute.Bool("pml.approval.shown", shown))
		telemetry.CountApproval(choice)
		span.End()
		return choice, shown
	}
}

// GuardHTTP is h behind pml serve's rules (bearer token, loopback
// origins only), for what pml serve serves beside /mcp (/metrics).
func GuardHTTP(token string, h http.Handler) http.Handler { return guard(token, h) }

// callSpan gives a call made outside any MCP request (pml call) a span
// of its own, so its steps form one trace; inside a request (its server
// span in ctx) it adds nothing.
func callSpan(ctx context.Context, tool string) (context.Context, func(Result)) {
	if !telemetry.Enabled() || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, func(Result) {}
	}
	ctx, span := telemetry.Start(ctx, "pml call "+tool, trace.SpanKindInternal, attribute.String("gen_ai.tool.name", tool))
	return ctx, func(res Result) {
		if res.IsError {
			telemetry.Fail(span, "tool_error", "the tool's result is an error")
		}
		span.End()
	}
}
