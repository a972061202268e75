package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Off (nothing configured), a span costs no allocation and records
// nothing; nothing is written into a request's _meta.
func TestOffIsFree(t *testing.T) {
	if FromEnv(func(string) string { return "" }).On() {
		t.Fatal("telemetry on with no variable set")
	}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, span := StartServer(ctx, Request{Method: "tools/call", Tool: "shell__exec"}, nil)
		_, s2 := Start(c, "pml.permit", trace.SpanKindInternal)
		s2.End()
		End(ctx, span, Request{}, true, time.Time{}, false, nil)
	})
	if allocs != 0 {
		t.Errorf("a span while off allocates %v times", allocs)
	}
	if m := ToMeta(ctx, nil); m != nil {
		t.Errorf("_meta written while off: %v", m)
	}
}

func TestSettingsFromTheStandardVariables(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, c := range []struct {
		name string
		env  func(string) string
		on   bool
		err  string
	}{
		{"an endpoint", env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"), true, ""},
		{"a traces endpoint", env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces"), true, ""},
		{"disabled", env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4318", "OTEL_SDK_DISABLED", "true"), false, ""},
		{"exporter none", env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4318", "OTEL_TRACES_EXPORTER", "none"), false, ""},
		{"grpc", env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), true, "4318"},
		{"http/json", env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4318", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"), true, "http/protobuf"},
	} {
		s := FromEnv(c.env)
		err := s.Check()
		if s.On() != c.on || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: on %v, %v", c.name, s.On(), err)
		}
	}
}

// On, a request's server span continues the trace of the client's
// _meta.traceparent, and a request pml sends carries pml's span in its
// own _meta; names and attributes are the conventions'.
// Exemplars are off unless OTEL_METRICS_EXEMPLAR_FILTER asks for them
// (the SDK reads its value; MetricsSetup turns them off when it is unset).
func TestExemplarFilterFromTheStandardVariable(t *testing.T) {
	if f := FromEnv(func(string) string { return "" }).ExemplarFilter; f != "" {
		t.Errorf("exemplar filter %q with no variable set", f)
	}
	env := map[string]string{"OTEL_METRICS_EXEMPLAR_FILTER": " trace_based "}
	if f := FromEnv(func(k string) string { return env[k] }).ExemplarFilter; f != "trace_based" {
		t.Errorf("exemplar filter %q, want trace_based", f)
	}
}

func TestTraceContextCrossesMeta(t *testing.T) { bothWays(t, traceContextCrossesMeta) }

// bothWays runs test with spans made at once (a provider of its own) and
// made when they end (pml's provider, pending.go), recorded by rec.
func bothWays(t *testing.T, test func(*testing.T, *tracetest.SpanRecorder)) {
	t.Run("at once", func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		t.Cleanup(Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), "test"))
		test(t, rec)
	})
	t.Run("at their end", func(t *testing.T) {
		t.Setenv("OTEL_TRACES_SAMPLER", "")
		rec := tracetest.NewSpanRecorder()
		t.Cleanup(UseProcessor(rec, "test"))
		if deferMode(deferring.Load()) != deferParentBased {
			t.Fatal("spans are not deferred under the default sampler")
		}
		test(t, rec)
	})
}

func traceContextCrossesMeta(t *testing.T, rec *tracetest.SpanRecorder) {

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx, span := StartServer(context.Background(), Request{Method: "tools/call", Tool: "echo__say", Protocol: "2025-06-18"}, map[string]any{"traceparent": parent})
	var sent map[string]any
	mw := ClientMiddleware("echo")(func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		sent = req.GetParams().GetMeta()
		return &mcp.CallToolResult{IsError: true}, nil
	})
	p := &mcp.CallToolParams{Name: "say", Arguments: map[string]any{"secret": "x"}}
	p.SetProgressToken("tok")
	if _, err := mw(ctx, "tools/call", &mcp.ClientRequest[*mcp.CallToolParams]{Params: p}); err != nil {
		t.Fatal(err)
	}
	End(ctx, span, Request{Method: "tools/call"}, true, time.Now(), false, nil)

	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	client, server := spans[0], spans[1]
	if server.Name() != "tools/call echo__say" || server.SpanKind() != trace.SpanKindServer || server.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || server.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("server span: %s %v trace %s parent %s", server.Name(), server.SpanKind(), server.SpanContext().TraceID(), server.Parent().SpanID())
	}
	if client.Name() != "tools/call say" || client.SpanKind() != trace.SpanKindClient || client.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Errorf("client span: %s %v", client.Name(), client.SpanKind())
	}
	tp2, _ := sent["traceparent"].(string)
	if !strings.Contains(tp2, client.SpanContext().TraceID().String()) || !strings.Contains(tp2, client.SpanContext().SpanID().String()) || sent["progressToken"] != "tok" {
		t.Errorf("the request's _meta: %v", sent)
	}
	attrs := map[string]string{}
	for _, a := range client.Attributes() {
		attrs[string(a.Key)] = a.Value.String()
	}
	for k, v := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "say", "error.type": "tool_error", "gen_ai.operation.name": "execute_tool"} {
		if attrs[k] != v {
			t.Errorf("client span %s = %q, want %q", k, attrs[k], v)
		}
	}
	for k := range attrs {
		if strings.Contains(k, "argument") || strings.Contains(attrs[k], "secret") {
			t.Errorf("an argument in the span: %s=%s", k, attrs[k])
		}
	}
}

// The fast path's _meta is raw JSON: the client's traceparent is read
// from it, and pml's replaces the client's in what the server gets, the
// other members passed on as written; off, nothing is read or written.
func TestTraceContextCrossesRawMeta(t *testing.T) { bothWays(t, traceContextCrossesRawMeta) }

func traceContextCrossesRawMeta(t *testing.T, rec *tracetest.SpanRecorder) {
	was := enabled.Load() // off for a moment
	enabled.Store(false)
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	raw := []byte(`{"traceparent":"` + parent + `","tracestate":"k=v","app":{"n":12345678901234567891}}`)
	if ctx := FromMetaJSON(context.Background(), raw); trace.SpanContextFromContext(ctx).IsValid() {
		t.Error("a trace context read while off")
	}
	if out := ToMetaJSON(context.Background(), raw); string(out) != string(raw) {
		t.Errorf("_meta changed while off: %s", out)
	}
	enabled.Store(was)
	ctx := FromMetaJSON(context.Background(), raw)
	if sc := trace.SpanContextFromContext(ctx); sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("the client's trace context was not read: %v", sc)
	}
	ctx, span := StartClient(ctx, Request{Method: "tools/call", Tool: "say"}, "echo")
	defer span.End()
	for _, meta := range [][]byte{raw, nil} {
		out := ToMetaJSON(ctx, meta)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		want := `"00-` + span.SpanContext().TraceID().String() + `-` + span.SpanContext().SpanID().String() + `-01"`
		if string(m["traceparent"]) != want {
			t.Errorf("traceparent %s, want %s", m["traceparent"], want)
		}
		if meta != nil && (string(m["app"]) != `{"n":12345678901234567891}` || string(m["tracestate"]) != `"k=v"`) {
			t.Errorf("the other members changed: %s", out)
		}
	}
	if out := ToMetaJSON(ctx, []byte(`[1]`)); string(out) != `[1]` {
		t.Errorf("a _meta that is not an object was rewritten: %s", out)
	}
}

// ToMetaJSON writes a _meta without members of its own directly, not
// through the propagator: what it writes is what the propagator would,
// sampled or not, with a tracestate or without.
func TestToMetaJSONWritesWhatThePropagatorWrites(t *testing.T) {
	enabled.Store(true)
	t.Cleanup(func() { enabled.Store(false) })
	ts, err := trace.ParseTraceState("k=v,a=b")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []trace.SpanContextConfig{
		{TraceID: trace.TraceID{0x4b, 0xf9, 1, 2, 3}, SpanID: trace.SpanID{0, 0xf0, 0x67, 0xaa}, TraceFlags: trace.FlagsSampled},
		{TraceID: trace.TraceID{0xff, 0xee}, SpanID: trace.SpanID{0x12, 0x34}},
		{TraceID: trace.TraceID{0x01}, SpanID: trace.SpanID{0x02}, TraceFlags: trace.FlagsSampled, TraceState: ts},
	} {
		ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(sc))
		want := map[string]string{}
		prop.Inject(ctx, propagation.MapCarrier(want))
		var got map[string]string
		if err := json.Unmarshal(ToMetaJSON(ctx, nil), &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || got["traceparent"] != want["traceparent"] || got["tracestate"] != want["tracestate"] {
			t.Errorf("ToMetaJSON wrote %v, the propagator %v", got, want)
		}
	}
}

// The memo gives what it built for a key back; full, it starts again
// rather than build on every lookup from then on.
func TestMemoKeepsWhatItBuiltAndStartsAgainWhenFull(t *testing.T) {
	var m memo[int, int]
	builds := 0
	build := func(k int) int { builds++; return k * 2 }
	for i := 0; i < memoMax; i++ {
		if m.get(i, build) != i*2 {
			t.Fatal("wrong value")
		}
	}
	if m.get(7, build) != 14 || builds != memoMax {
		t.Fatalf("%d builds for %d keys and one asked again", builds, memoMax)
	}
	m.get(memoMax, build) // full: starts again
	m.get(memoMax, build)
	if builds != memoMax+1 || len(*m.m.Load()) != 1 {
		t.Fatalf("full memo: %d builds, %d keys", builds, len(*m.m.Load()))
	}
}

// End gives a request's span its outcome by the conventions: a JSON-RPC
// error's code (and rpc.response.status_code), _OTHER for another
// error, tool_error for a result with isError, nothing for a success.
func TestEndRecordsTheOutcome(t *testing.T) { bothWays(t, endRecordsTheOutcome) }

func endRecordsTheOutcome(t *testing.T, rec *tracetest.SpanRecorder) {
	r := Request{Method: "tools/call", Tool: "say"}
	for _, c := range []struct {
		err     error
		toolErr bool
		want    string
		code    string
	}{
		{&jsonrpc.Error{Code: -32602, Message: "bad params"}, false, "-32602", "-32602"},
		{errors.New("the server died"), false, "_OTHER", ""},
		{nil, true, "tool_error", ""},
		{nil, false, "", ""},
	} {
		ctx, span := StartServer(context.Background(), r, nil)
		End(ctx, span, r, true, time.Now(), c.toolErr, c.err)
		ended := rec.Ended()
		got := map[string]string{}
		for _, a := range ended[len(ended)-1].Attributes() {
			got[string(a.Key)] = a.Value.String()
		}
		if got["error.type"] != c.want || got["rpc.response.status_code"] != c.code || got["gen_ai.tool.name"] != "say" {
			t.Errorf("%v, tool error %v: attributes %v, want error.type %q and code %q", c.err, c.toolErr, got, c.want, c.code)
		}
	}
}
