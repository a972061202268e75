package telemetry

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Request describes one MCP request for its span: names only, never
// arguments or results.
type Request struct {
	// Method is the MCP method (tools/call, tools/list, initialize…).
	Method string
	// Tool is the tool a tools/call names (gen_ai.tool.name).
	Tool string
	// SessionID and Protocol are the session's, when known.
	SessionID, Protocol string
	// ID is the JSON-RPC request id, when known.
	ID string
	// Name is pml's own name of the tool when the wire name (Tool)
	// differs (pml.tool).
	Name string
}

// spanName is the conventions' `{mcp.method.name} {target}`.
func (r Request) spanName() string {
	if r.Tool != "" {
		return r.Method + " " + r.Tool
	}
	return r.Method
}

func (r Request) attrs(extra ...attribute.KeyValue) []attribute.KeyValue {
	a := append(make([]attribute.KeyValue, 0, 8+len(extra)), semconv.McpMethodNameKey.String(r.Method), semconv.NetworkTransportPipe)
	if r.Tool != "" {
		a = append(a, semconv.GenAIToolName(r.Tool), semconv.GenAIOperationNameExecuteTool)
	}
	if r.SessionID != "" {
		a = append(a, semconv.McpSessionID(r.SessionID))
	}
	if r.Protocol != "" {
		a = append(a, semconv.McpProtocolVersion(r.Protocol))
	}
	if r.ID != "" {
		a = append(a, semconv.JSONRPCRequestID(r.ID))
	}
	if r.Name != "" {
		a = append(a, attribute.String("pml.tool", r.Name))
	}
	return append(a, extra...)
}

// spanShape is a request span's name, start options (its kind) and
// attributes, built once per kind of request: a warm call starts its
// spans from the same few, without building a name, an attribute or an
// option.
type spanShape struct {
	name  string
	opts  []trace.SpanStartOption
	attrs []attribute.KeyValue
}

// shapeKey is what a request span's shape depends on.
type shapeKey struct {
	r      Request
	server string
	kind   trace.SpanKind
}

var shapes memo[shapeKey, *spanShape]

func shapeOf(r Request, kind trace.SpanKind, server string) *spanShape {
	return shapeFor(shapeKey{r, server, kind})
}

func shapeFor(k shapeKey) *spanShape {
	if k.r.ID != "" {
		// An id is new with each request: not kept.
		return newShape(k)
	}
	return shapes.get(k, newShape)
}

func newShape(k shapeKey) *spanShape {
	var a []attribute.KeyValue
	if k.server != "" {
		a = k.r.attrs(attribute.String("pml.server", k.server))
	} else {
		a = k.r.attrs()
	}
	return &spanShape{name: k.r.spanName(), opts: []trace.SpanStartOption{kindOption(k.kind)}, attrs: a}
}

// start starts the span, with its attributes when withAttrs (else End
// sets them): given as a start option (trace.WithAttributes), the SDK
// would copy them into the start's configuration and then again into
// the span, an allocation and a copy more on each span. (Only a sampler
// could tell the difference, by reading them: the samplers
// OTEL_TRACES_SAMPLER names read none.)
func (s *spanShape) start(ctx context.Context, withAttrs bool) (context.Context, trace.Span) {
	t := tracer.Load()
	if t == nil {
		return ctx, noSpan
	}
	ctx, span := (*t).Start(ctx, s.name, s.opts...)
	if withAttrs {
		span.SetAttributes(s.attrs...)
	}
	return ctx, span
}

// StartServer starts the server span of a request pml answers,
// continuing the trace a client sent in params._meta. End it with End
// (server true), which sets its attributes: they are the request's
// (r), known from the start, and set after the answer went rather than
// on its way. (In make bench's telemetry row, the first span a call
// starts took 10-15 µs of its median, cold; its attributes 2 more.)
func StartServer(ctx context.Context, r Request, meta map[string]any) (context.Context, trace.Span) {
	if !enabled.Load() {
		return ctx, noSpan
	}
	return startRequest(FromMeta(ctx, meta), shapeKey{r: r, kind: trace.SpanKindServer}, false)
}

// startRequest starts a request's span of the shape k gives: pending
// (pending.go) when the sampler allows, its shape found when it is made;
// else at once.
func startRequest(ctx context.Context, k shapeKey, withAttrs bool) (context.Context, trace.Span) {
	if ctx, span, ok := startPending(ctx, k); ok {
		return ctx, span
	}
	return shapeFor(k).start(ctx, withAttrs)
}

// StartClient starts the client span of a request pml sends to the MCP
// server named server.
func StartClient(ctx context.Context, r Request, server string) (context.Context, trace.Span) {
	if !enabled.Load() {
		return ctx, noSpan
	}
	return startRequest(ctx, shapeKey{r: r, server: server, kind: trace.SpanKindClient}, true)
}

// End ends a request's span and records its duration (began) in the
// conventions' operation duration, server or client side: a protocol
// error sets error.type and rpc.response.status_code to its JSON-RPC
// code, a tool result with isError sets error.type "tool_error", as the
// conventions have it.
func End(ctx context.Context, span trace.Span, r Request, server bool, began time.Time, toolError bool, err error) {
	if !Active() {
		span.End()
		return
	}
	if p, pending := span.(*pendingSpan); pending {
		if server {
			// The request as it is known now: its attributes are
			// set when the span is made.
			ender := r
			p.request(&ender)
		}
	} else if server && span.IsRecording() {
		// StartServer left them to here.
		span.SetAttributes(shapeOf(r, trace.SpanKindServer, "").attrs...)
	}
	errType, desc := "", ""
	switch {
	case err != nil:
		// (Only here: the pointer errors.As fills escapes, an allocation
		// that a call without an error does not make.)
		if we := (*jsonrpc.Error)(nil); errors.As(err, &we) {
			errType, desc = strconv.FormatInt(we.Code, 10), we.Message
			span.SetAttributes(semconv.RPCResponseStatusCode(errType))
		} else {
			errType, desc = "_OTHER", err.Error()
		}
	case toolError:
		errType, desc = "tool_error", "the tool's result is an error"
	}
	if errType != "" {
		Fail(span, errType, desc)
	}
	if p, ok := span.(*pendingSpan); ok && p.recordLater(server, r, began, errType) {
		// Its duration is recorded when it is made, off the call's
		// path, as it ended now.
		span.End()
		return
	}
	span.End()
	recordOp(ctx, server, r, began, errType)
}

// Active reports whether traces or metrics are on: the middlewares do
// nothing otherwise.
func Active() bool { return enabled.Load() || metricsOn.Load() }

// ClientMiddleware gives every request pml sends to the MCP server named
// server its client span, with the trace context put into the request's
// params._meta (traceparent, tracestate) so a server that reads it
// continues the same trace. Off, it passes requests on untouched.
func ClientMiddleware(server string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if !Active() || strings.HasPrefix(method, "notifications/") {
				return next(ctx, method, req)
			}
			began := time.Now()
			r := Request{Method: method}
			p := req.GetParams()
			if cp, ok := p.(*mcp.CallToolParams); ok && cp != nil {
				r.Tool = cp.Name
			}
			ctx, span := StartClient(ctx, r, server)
			if p != nil && !IsNilParams(p) {
				p.SetMeta(ToMeta(ctx, p.GetMeta()))
			}
			res, err := next(ctx, method, req)
			toolErr := false
			if cr, ok := res.(*mcp.CallToolResult); ok && cr != nil {
				toolErr = cr.IsError
			}
			End(ctx, span, r, false, began, toolErr, err)
			return res, err
		}
	}
}

// IsNilParams reports whether p is a typed nil (the SDK's params are
// pointers, and GetParams of a request sent without params returns one).
func IsNilParams(p mcp.Params) bool {
	v := reflect.ValueOf(p)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
