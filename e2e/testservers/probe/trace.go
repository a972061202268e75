package main

import (
	"context"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// metaCarrier reads the W3C trace context keys of an MCP _meta object.
type metaCarrier map[string]any

func (m metaCarrier) Get(k string) string { s, _ := m[k].(string); return s }
func (m metaCarrier) Set(k, v string)     { m[k] = v }
func (m metaCarrier) Keys() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// addTraceTool adds "traced", a tool that continues the trace its
// caller put in params._meta (traceparent) with a server span of its own,
// exported over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT before the call
// returns: what a traced MCP server does. Without the variable the tool
// only says what traceparent it got.
func addTraceTool(s *mcp.Server) {
	var tracer trace.Tracer
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" {
		exp, err := otlptracehttp.New(context.Background())
		if err != nil {
			log.Printf("otlp exporter: %v", err)
		} else {
			res := resource.NewSchemaless(attribute.String("service.name", "probe"))
			// A synchronous exporter: the span is in the backend when the
			// call returns, so a test can look for it at once.
			tracer = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res)).Tracer("probe")
		}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "traced", Description: "Continue the caller's trace (params._meta.traceparent) with a span of the probe's own."},
		func(ctx context.Context, req *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			meta := req.Params.GetMeta()
			got := metaCarrier(meta).Get("traceparent")
			if tracer != nil {
				ctx = propagation.TraceContext{}.Extract(ctx, metaCarrier(meta))
				_, span := tracer.Start(ctx, "tools/call traced", trace.WithSpanKind(trace.SpanKindServer),
					trace.WithAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", "traced")))
				span.End()
			}
			return text("traceparent: " + got), nil, nil
		})
}
