package telemetry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A forwarded call's client span, with the provider Setup makes: the
// context the request carries names a span that does not exist yet and
// nothing is started; once the call ends, the span the SDK exports has
// that very id, the server span for its parent, the request's start for
// its own, and the attributes and outcome a span started at once has.
func TestClientLaterIsTheSpanItsServerWasSent(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	t.Cleanup(UseProcessor(rec, "test"))
	r := Request{Method: "tools/call", Tool: "say"}
	for _, c := range []struct {
		toolErr bool
		err     error
		errType string
	}{{false, nil, ""}, {true, nil, "tool_error"}, {false, errors.New("the server died"), "_OTHER"}} {
		sctx, server := StartServer(context.Background(), Request{Method: "tools/call", Tool: "probe:say"}, nil)
		before := len(rec.Started())
		began := time.Now()
		ctx, span := StartClientLater(sctx, r, "probe")
		sent := trace.SpanContextFromContext(ctx)
		if len(rec.Started()) != before {
			t.Fatalf("a span was started on the request's way")
		}
		if !sent.IsValid() || !sent.IsSampled() || sent.TraceID() != server.SpanContext().TraceID() || sent.SpanID() == server.SpanContext().SpanID() {
			t.Fatalf("the request carries %v under the server span %v: want a sampled span of its own in the same trace", sent, server.SpanContext())
		}
		meta := string(ToMetaJSON(ctx, nil))
		if want := "00-" + sent.TraceID().String() + "-" + sent.SpanID().String() + "-01"; !strings.Contains(meta, want) {
			t.Fatalf("the request's _meta %s, want traceparent %s", meta, want)
		}
		time.Sleep(2 * time.Millisecond)
		span.End(c.toolErr, c.err)
		server.End()
		var client sdktrace.ReadOnlySpan
		for _, sp := range rec.Ended() {
			if sp.SpanContext().SpanID() == sent.SpanID() {
				client = sp
			}
		}
		if client == nil {
			t.Fatalf("no span with the id the server was sent (%s)", sent.SpanID())
		}
		if client.Name() != "tools/call say" || client.SpanKind() != trace.SpanKindClient || client.Parent().SpanID() != server.SpanContext().SpanID() {
			t.Errorf("span %q kind %v parent %s, want tools/call say, client, under the server span %s", client.Name(), client.SpanKind(), client.Parent().SpanID(), server.SpanContext().SpanID())
		}
		if client.StartTime().Before(began) || !client.StartTime().Before(began.Add(time.Millisecond)) || client.EndTime().Sub(client.StartTime()) < 2*time.Millisecond {
			t.Errorf("span from %v to %v: want it to start when the request did (%v) and last until its end", client.StartTime(), client.EndTime(), began)
		}
		got := map[string]string{}
		for _, a := range client.Attributes() {
			got[string(a.Key)] = a.Value.String()
		}
		if got["pml.server"] != "probe" || got["gen_ai.tool.name"] != "say" || got["mcp.method.name"] != "tools/call" || got["error.type"] != c.errType {
			t.Errorf("tool error %v, error %v: attributes %v, want pml.server probe, the tool, and error.type %q", c.toolErr, c.err, got, c.errType)
		}
	}
}

// A trace the sampler left out gets no client span, and its request a
// traceparent that says so; a request with no span around it, or a
// provider of the caller's (Use), gets its client span started at once,
// as before.
func TestClientLaterOtherwise(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	stop := UseProcessor(rec, "test")
	unsampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}}))
	ctx, span := StartClientLater(unsampled, Request{Method: "tools/call", Tool: "say"}, "probe")
	if sc := trace.SpanContextFromContext(ctx); !sc.IsValid() || sc.IsSampled() || sc.SpanID() == (trace.SpanID{2}) {
		t.Errorf("under a trace not sampled, the request carries %v: want a span id of its own, not sampled", sc)
	}
	span.End(false, nil)
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("a trace not sampled got %d spans", n)
	}
	_, span = StartClientLater(context.Background(), Request{Method: "tools/call", Tool: "say"}, "probe")
	if len(rec.Started()) != 1 {
		t.Errorf("a request with no span around it: %d spans started at once, want its own", len(rec.Started()))
	}
	span.End(false, nil)
	stop()

	rec = tracetest.NewSpanRecorder()
	t.Cleanup(Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), "test"))
	sctx, server := StartServer(context.Background(), Request{Method: "tools/call"}, nil)
	ctx, span = StartClientLater(sctx, Request{Method: "tools/call", Tool: "say"}, "probe")
	if len(rec.Started()) != 2 {
		t.Fatalf("with a provider of the caller's, %d spans started, want the client span started at once", len(rec.Started()))
	}
	span.End(false, nil)
	server.End()
	if sent := trace.SpanContextFromContext(ctx); rec.Ended()[0].SpanContext().SpanID() != sent.SpanID() {
		t.Errorf("the request carries %s, the client span is %s", sent.SpanID(), rec.Ended()[0].SpanContext().SpanID())
	}
}

// idGenerator gives a span the id picked for it, and others ids of
// their own, never zero.
func TestIDGeneratorGivesThePresetID(t *testing.T) {
	g := idGenerator{}
	want := trace.SpanID{9, 8, 7}
	if got := g.NewSpanID(context.WithValue(context.Background(), presetSpanID{}, want), trace.TraceID{1}); got != want {
		t.Errorf("preset %s, got %s", want, got)
	}
	seen := map[trace.SpanID]bool{}
	for i := 0; i < 1000; i++ {
		tid, sid := g.NewIDs(context.Background())
		s2 := g.NewSpanID(context.Background(), tid)
		if !tid.IsValid() || !sid.IsValid() || !s2.IsValid() || seen[sid] || seen[s2] {
			t.Fatalf("ids %s %s %s: want valid and new", tid, sid, s2)
		}
		seen[sid], seen[s2] = true, true
	}
}
