package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkWarmCallTelemetry: what traces and metrics add to one warm
// call to a pooled server through the stdio fast path (its server span
// with the permission's event, its client span with the trace context
// for the server, both durations, the pool and outcome counters),
// exported over OTLP/HTTP to a receiver on loopback as make bench's
// telemetry row has them. sdk is the SDK's batch span processor, pml
// the one pml uses (batch.go).
//
//	go test -run '^$' -bench WarmCallTelemetry -benchmem -count 10 ./internal/telemetry
func BenchmarkWarmCallTelemetry(b *testing.B) {
	for _, c := range []struct {
		name string
		proc func(sdktrace.SpanExporter) sdktrace.SpanProcessor
	}{
		{"sdk", func(e sdktrace.SpanExporter) sdktrace.SpanProcessor { return sdktrace.NewBatchSpanProcessor(e) }},
		{"pml", func(e sdktrace.SpanExporter) sdktrace.SpanProcessor { return newEnvBatcher(e) }},
	} {
		b.Run(c.name, func(b *testing.B) { benchWarmCall(b, c.proc) })
	}
}

func benchWarmCall(b *testing.B, proc func(sdktrace.SpanExporter) sdktrace.SpanProcessor) {
	// Every span leaves, as in a session whose calls come slower than
	// a batch is sent (the loop makes them faster).
	b.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "10000000")
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer recv.Close()
	ctx := context.Background()
	s := Settings{Endpoint: recv.URL, FromConfig: true}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(s.signalURL("/v1/traces")))
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(proc(exp)))
	stop := Use(tp, "bench")
	defer func() {
		stop()
		_ = tp.Shutdown(ctx)
	}()
	_, stopMetrics, err := MetricsSetup(ctx, s, "bench", false)
	if err != nil {
		b.Fatal(err)
	}
	defer stopMetrics()
	server := Request{Method: "tools/call", Tool: "probe:echo", SessionID: "", Protocol: "2025-06-18"}
	client := Request{Method: "tools/call", Tool: "echo"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		began := time.Now()
		sctx, sspan := StartServer(FromMetaJSON(ctx, nil), server, nil)
		AddEvent(sspan, "pml.permit", "pml.decision", "allow", "pml.pattern", "*")
		cctx, cspan := StartClient(sctx, client, "probe")
		if len(ToMetaJSON(cctx, nil)) == 0 {
			b.Fatal("no trace context for the server")
		}
		CountPool("probe", true)
		End(cctx, cspan, client, false, began, false, nil)
		CountCall("allow")
		End(sctx, sspan, server, true, began, false, nil)
	}
	if err := tp.ForceFlush(ctx); err != nil {
		b.Fatal(err)
	}
}
