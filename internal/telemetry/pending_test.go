package telemetry

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// usePending records pml's spans as Setup makes them, under the sampler
// OTEL_TRACES_SAMPLER names (sampler).
func usePending(t *testing.T, sampler string) *tracetest.SpanRecorder {
	t.Helper()
	t.Setenv("OTEL_TRACES_SAMPLER", sampler)
	rec := tracetest.NewSpanRecorder()
	t.Cleanup(UseProcessor(rec, "test"))
	return rec
}

func remoteParent(t *testing.T, sampled bool) context.Context {
	t.Helper()
	flags := "-00"
	if sampled {
		flags = "-01"
	}
	return FromMeta(context.Background(), map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7" + flags, "tracestate": "k=v"})
}

// A request's span made at its end is the span the request ran under:
// the ids its steps and the server were given, begun when the request
// began, with the events, errors and status it had meanwhile (each at
// the time it happened), its steps' spans under it.
func TestAPendingSpanIsMadeAsTheRequestSawIt(t *testing.T) {
	rec := usePending(t, "")
	r := Request{Method: "tools/call", Tool: "echo__say", SessionID: "s1"}
	began := time.Now()
	ctx, span := StartServer(remoteParent(t, true), r, nil)
	if _, ok := span.(*pendingSpan); !ok {
		t.Fatalf("the server span is a %T, not made at its end", span)
	}
	seen := trace.SpanContextFromContext(ctx)
	if !span.IsRecording() || !seen.IsSampled() || seen.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || seen.TraceState().String() != "k=v" {
		t.Fatalf("during the request: %v, recording %v", seen, span.IsRecording())
	}
	AddEvent(span, "pml.permit", "pml.decision", "allow", "pml.pattern", "*")
	eventAt := time.Now()
	cctx, client := StartClient(ctx, Request{Method: "tools/call", Tool: "say"}, "echo")
	sent := string(AppendTraceMembers(nil, cctx))
	_, step := Start(cctx, "pml.step", trace.SpanKindInternal)
	step.End()
	span.RecordError(errors.New("boom"))
	End(cctx, client, Request{Method: "tools/call", Tool: "say"}, false, time.Now(), true, nil)
	if len(rec.Ended()) != 2 {
		t.Fatalf("%d spans ended before the request, want the step's and the client's", len(rec.Ended()))
	}
	time.Sleep(2 * time.Millisecond)
	answered := time.Now()
	End(ctx, span, r, true, began, false, nil)
	span.End() // a second end does nothing

	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	stepSpan, clientSpan, server := spans[0], spans[1], spans[2]
	if server.SpanContext().SpanID() != seen.SpanID() || server.SpanContext().TraceID() != seen.TraceID() || server.Parent().SpanID().String() != "00f067aa0ba902b7" || !server.Parent().IsRemote() {
		t.Errorf("server span %v under %v, the request saw %v", server.SpanContext(), server.Parent(), seen)
	}
	if server.SpanContext().TraceState().String() != "k=v" || server.SpanKind() != trace.SpanKindServer || server.Name() != "tools/call echo__say" {
		t.Errorf("server span %s %v tracestate %q", server.Name(), server.SpanKind(), server.SpanContext().TraceState())
	}
	if server.StartTime().Before(began) || server.StartTime().After(eventAt) || server.EndTime().Before(answered) {
		t.Errorf("server span from %v to %v; the request began %v and was answered %v", server.StartTime(), server.EndTime(), began, answered)
	}
	attrs := map[string]string{}
	for _, a := range server.Attributes() {
		attrs[string(a.Key)] = a.Value.String()
	}
	if attrs["mcp.method.name"] != "tools/call" || attrs["gen_ai.tool.name"] != "echo__say" || attrs["mcp.session.id"] != "s1" {
		t.Errorf("server span attributes %v", attrs)
	}
	var names []string
	for _, e := range server.Events() {
		names = append(names, e.Name)
		if e.Name == "pml.permit" && (e.Time.Before(server.StartTime()) || e.Time.After(eventAt)) {
			t.Errorf("the permit event at %v, not when it happened (%v to %v)", e.Time, server.StartTime(), eventAt)
		}
	}
	if len(names) != 2 || names[0] != "pml.permit" || names[1] != "exception" {
		t.Errorf("server span events %v, want pml.permit and exception", names)
	}
	if clientSpan.Parent().SpanID() != seen.SpanID() || clientSpan.SpanKind() != trace.SpanKindClient || clientSpan.Status().Code != codes.Error {
		t.Errorf("client span under %v, kind %v, status %v", clientSpan.Parent(), clientSpan.SpanKind(), clientSpan.Status())
	}
	if want := `"traceparent":"00-` + seen.TraceID().String() + `-` + clientSpan.SpanContext().SpanID().String() + `-01","tracestate":"k=v"`; sent != want {
		t.Errorf("the server was sent %s, want %s", sent, want)
	}
	if stepSpan.Parent().SpanID() != clientSpan.SpanContext().SpanID() {
		t.Errorf("the step's span is not under the client span")
	}
}

// A root request gets a trace of its own; under the default sampler a
// parent that is not sampled makes nothing, and the server is told so;
// always_on samples it all the same.
func TestAPendingSpanIsSampledAsTheSamplerWould(t *testing.T) {
	t.Run("root", func(t *testing.T) {
		rec := usePending(t, "")
		ctx, span := StartServer(context.Background(), Request{Method: "ping"}, nil)
		sc := trace.SpanContextFromContext(ctx)
		End(ctx, span, Request{Method: "ping"}, true, time.Now(), false, nil)
		if len(rec.Ended()) != 1 || !sc.IsValid() || !sc.IsSampled() || rec.Ended()[0].SpanContext().SpanID() != sc.SpanID() || rec.Ended()[0].Parent().IsValid() {
			t.Errorf("a root request: %v, %d spans", sc, len(rec.Ended()))
		}
	})
	t.Run("a parent not sampled", func(t *testing.T) {
		rec := usePending(t, "parentbased_always_on")
		ctx, span := StartServer(remoteParent(t, false), Request{Method: "ping"}, nil)
		sent := string(AppendTraceMembers(nil, ctx))
		if span.IsRecording() || sent[len(sent)-len(`-00","tracestate":"k=v"`):] != `-00","tracestate":"k=v"` {
			t.Errorf("recording %v; sent %s", span.IsRecording(), sent)
		}
		AddEvent(span, "pml.permit", "a", "b", "c", "d")
		End(ctx, span, Request{Method: "ping"}, true, time.Now(), false, nil)
		if len(rec.Ended()) != 0 {
			t.Errorf("%d spans of a trace not sampled", len(rec.Ended()))
		}
	})
	t.Run("always_on", func(t *testing.T) {
		rec := usePending(t, " Always_On ")
		ctx, span := StartServer(remoteParent(t, false), Request{Method: "ping"}, nil)
		if !trace.SpanContextFromContext(ctx).IsSampled() {
			t.Error("always_on: not sampled")
		}
		End(ctx, span, Request{Method: "ping"}, true, time.Now(), false, nil)
		if len(rec.Ended()) != 1 || !rec.Ended()[0].SpanContext().IsSampled() {
			t.Errorf("always_on: %d spans", len(rec.Ended()))
		}
	})
	for _, other := range []string{"traceidratio", "parentbased_traceidratio", "always_off", "jaeger_remote"} {
		t.Run(other, func(t *testing.T) {
			usePending(t, other)
			_, span := StartServer(context.Background(), Request{Method: "ping"}, nil)
			defer span.End()
			if _, ok := span.(*pendingSpan); ok {
				t.Errorf("%s: a span left to its end, whose sampling pml cannot decide", other)
			}
		})
	}
}

// The provider's ids are random and valid; a preset id is given only to
// the span made for it.
func TestIDsAreRandomButForTheSpanMadeForThem(t *testing.T) {
	g := ids{}
	seen := map[trace.SpanID]bool{}
	for range 1000 {
		tid, sid := g.NewIDs(context.Background())
		if !tid.IsValid() || !sid.IsValid() || seen[sid] {
			t.Fatalf("ids %v %v", tid, sid)
		}
		seen[sid] = true
	}
	p := &pendingSpan{sc: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}})}
	ctx := context.WithValue(context.Background(), presetKey{}, p)
	if tid, sid := g.NewIDs(ctx); tid != (trace.TraceID{1}) || sid != (trace.SpanID{2}) {
		t.Errorf("preset ids not given: %v %v", tid, sid)
	}
	if sid := g.NewSpanID(ctx, trace.TraceID{1}); sid != (trace.SpanID{2}) {
		t.Errorf("preset span id not given: %v", sid)
	}
	if sid := g.NewSpanID(ctx, trace.TraceID{9}); sid == (trace.SpanID{2}) {
		t.Error("a preset span id given in another trace")
	}
}

var _ sdktrace.IDGenerator = ids{}

// useBatcher records pml's spans as Setup has them: made by its batcher
// when a batch leaves, sent to exp.
func useBatcher(t *testing.T, exp sdktrace.SpanExporter, s bspSettings) *batcher {
	t.Helper()
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	bat := newBatcher(exp, s)
	tp, mode := newProvider(os.Getenv, sdktrace.WithSpanProcessor(bat))
	use(tp, "test")
	deferring.Store(int32(mode))
	maker.Store(bat)
	t.Cleanup(func() {
		enabled.Store(false)
		_ = tp.Shutdown(context.Background())
		maker.Store(nil)
	})
	return bat
}

// Under Setup's provider a request's spans are made by the batcher, off
// the call's path, when their batch leaves: with the times they had
// (begun when the request began, ended when it ended, not when the
// batch left), and all of them at the exit.
func TestPendingSpansAreMadeWhenTheirBatchLeaves(t *testing.T) {
	exp := &keepingExporter{InMemoryExporter: tracetest.NewInMemoryExporter()}
	bat := useBatcher(t, exp, bspSettings{delay: time.Hour, timeout: time.Second, maxQueue: 8, maxBatch: 8})
	r := Request{Method: "tools/call", Tool: "echo__say"}
	began := time.Now()
	ctx, span := StartServer(remoteParent(t, true), r, nil)
	AddEvent(span, "pml.permit", "pml.decision", "allow", "pml.pattern", "*")
	cctx, client := StartClient(ctx, Request{Method: "tools/call", Tool: "say"}, "echo")
	End(cctx, client, Request{Method: "tools/call", Tool: "say"}, false, time.Now(), false, nil)
	End(ctx, span, r, true, began, false, nil)
	ended := time.Now()
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans sent before their batch left", n)
	}
	bat.mu.Lock()
	queued, waiting := len(bat.spans), len(bat.ended)
	bat.mu.Unlock()
	if queued != 0 || waiting != 2 {
		t.Fatalf("%d spans made and %d waiting on the call's path, want none made and 2 waiting", queued, waiting)
	}
	time.Sleep(5 * time.Millisecond)
	if err := bat.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans after the batch left", len(spans))
	}
	client2, server := spans[0], spans[1]
	if server.Name != "tools/call echo__say" || server.SpanContext.SpanID() != trace.SpanContextFromContext(ctx).SpanID() || server.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("server span %s %v under %v", server.Name, server.SpanContext, server.Parent)
	}
	if client2.Parent.SpanID() != server.SpanContext.SpanID() || client2.SpanKind != trace.SpanKindClient {
		t.Errorf("client span under %v", client2.Parent)
	}
	if server.StartTime.Before(began) || server.EndTime.After(ended) || len(server.Events) != 1 || server.Events[0].Time.After(ended) {
		t.Errorf("server span %v to %v with events %v; the request began %v and ended by %v", server.StartTime, server.EndTime, server.Events, began, ended)
	}

	// What waits is sent at the exit (fewer than a batch: nothing
	// leaves before it).
	for range 3 {
		ctx, span := StartServer(context.Background(), Request{Method: "ping"}, nil)
		End(ctx, span, Request{Method: "ping"}, true, time.Now(), false, nil)
	}
	if err := bat.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := exp.total(); n != 5 {
		t.Errorf("%d spans sent in all after the exit, want the 2 before and the 3 waiting", n)
	}
	// A span that ends after it is not taken, nor sent.
	_, late := StartServer(context.Background(), Request{Method: "ping"}, nil)
	late.End()
	if n := exp.total(); n != 5 {
		t.Errorf("a span that ended after the exit was sent")
	}
}

// Past the queue's size an ended span is dropped, as a made one is.
func TestEndedSpansPastTheQueueAreDropped(t *testing.T) {
	b := &batcher{bsp: bspSettings{maxQueue: 8, maxBatch: 8}, full: make(chan struct{}, 1)}
	for range 12 {
		if !b.later(&pendingSpan{}) {
			t.Fatal("an ended span refused before the exit")
		}
	}
	if len(b.ended) != 8 || b.dropped != 4 || len(b.full) != 1 {
		t.Errorf("%d waiting and %d dropped of 12 past a queue of 8; batch ready: %v", len(b.ended), b.dropped, len(b.full) == 1)
	}
}

// keepingExporter is an in-memory exporter that keeps count of what it
// was sent through its shutdown (which empties the one it wraps).
type keepingExporter struct {
	*tracetest.InMemoryExporter
	mu sync.Mutex
	n  int
}

func (c *keepingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	c.mu.Lock()
	c.n += len(spans)
	c.mu.Unlock()
	return c.InMemoryExporter.ExportSpans(ctx, spans)
}

func (c *keepingExporter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// A request's duration is recorded when its span is made, as it was when
// the request ended; with exemplars asked for (which carry the span's
// context), at once.
func TestARequestsDurationIsRecordedWhenItsSpanIsMade(t *testing.T) {
	for _, exemplars := range []bool{false, true} {
		s := Settings{}
		if exemplars {
			s.ExemplarFilter = "trace_based"
		}
		h, stop, err := MetricsSetup(context.Background(), s, "test", true)
		if err != nil {
			t.Fatal(err)
		}
		exp := &keepingExporter{InMemoryExporter: tracetest.NewInMemoryExporter()}
		bat := useBatcher(t, exp, bspSettings{delay: time.Hour, timeout: time.Second, maxQueue: 8, maxBatch: 8})
		tool := "dur" + strconv.FormatBool(exemplars)
		r := Request{Method: "tools/call", Tool: tool}
		began := time.Now().Add(-250 * time.Millisecond)
		ctx, span := StartServer(context.Background(), r, nil)
		End(ctx, span, r, true, began, false, nil)
		count := `mcp_server_operation_duration_seconds_count{gen_ai_tool_name="` + tool + `",mcp_method_name="tools/call",network_transport="pipe",otel_scope_name="github.com/pml-dev/pml",otel_scope_schema_url="",otel_scope_version=""} 1`
		if got := strings.Contains(scrape(t, h.ServeHTTP), count); got != exemplars {
			t.Errorf("exemplars %v: the duration recorded before the span was made: %v", exemplars, got)
		}
		if err := bat.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := scrape(t, h.ServeHTTP)
		if !strings.Contains(got, count) {
			t.Errorf("exemplars %v: no %s after the span was made in\n%s", exemplars, count, got)
		}
		// 0.25 s and a little: over the bucket up to 0.25 s.
		for _, l := range strings.Split(got, "\n") {
			if strings.HasPrefix(l, "mcp_server_operation_duration_seconds_bucket{") && strings.Contains(l, `"`+tool+`"`) && strings.Contains(l, `le="0.25"`) && !strings.HasSuffix(l, "} 0") {
				t.Errorf("exemplars %v: the duration is not the request's: %s", exemplars, l)
			}
		}
		if sum := `mcp_server_operation_duration_seconds_sum{gen_ai_tool_name="` + tool + `"`; !strings.Contains(got, sum+`,mcp_method_name="tools/call",network_transport="pipe",otel_scope_name="github.com/pml-dev/pml",otel_scope_schema_url="",otel_scope_version=""} 0.25`) {
			t.Errorf("exemplars %v: the sum is not the request's 0.25 s", exemplars)
		}
		stop()
		exemplarsOn.Store(false)
	}
}
