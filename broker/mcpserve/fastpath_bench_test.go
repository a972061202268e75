package mcpserve

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/pml-dev/pml/internal/container/containertest"
	"github.com/pml-dev/pml/internal/jsonrpc"
	"github.com/pml-dev/pml/internal/telemetry"
)

// The fast path's own work per call, without Docker: pml stdio (the real
// broker, every layer) in front of a pooled server whose container is a
// goroutine answering each call with a fixed result, the client a loop
// writing frames and reading lines. What the server and the client cost
// is a few allocations of the total; the rest is pml's, as a relay.
//
//	go test -run '^$' -bench BenchmarkFastPathCall -benchmem ./broker/mcpserve
//	  (-cpuprofile, -memprofile for where it goes)

// rawEchoServer plays a pooled MCP server with as little work as the
// protocol allows: fixed answers to initialize and tools/list, and to
// each tools/call a fixed result under the call's id.
func rawEchoServer(p *containertest.Proc) int { return echoServing(p, echoTools) }

// echoTools is rawEchoServer's tools/list result.
const echoTools = `{"tools":[{"name":"echo","description":"says x","inputSchema":{"type":"object"}}]}`

// echoServing is rawEchoServer answering tools/list with tools.
func echoServing(p *containertest.Proc, tools string) int {
	in := bufio.NewReader(p.In)
	var out []byte
	for {
		line, err := in.ReadSlice('\n')
		if err != nil {
			return 0
		}
		m, ok := jsonrpc.Scan(bytes.TrimSpace(line))
		if !ok || m.ID == nil {
			continue
		}
		out = append(out[:0], `{"jsonrpc":"2.0","id":`...)
		out = append(out, m.ID...)
		switch string(m.Method) {
		case `"initialize"`:
			out = append(out, `,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"echo","version":"1"}}}`...)
		case `"tools/list"`:
			out = append(out, `,"result":`+tools+`}`...)
		case `"tools/call"`:
			// Which path the call came by: the fast path's ids are
			// pml's own strings, the go-sdk session's integers.
			how := "slow"
			if bytes.HasPrefix(m.ID, []byte(`"pml-f-`)) {
				how = "fast"
			}
			// And the trace context it was sent, when it was (traces on).
			if tp := jsonrpc.Member(jsonrpc.Member(m.Params, "_meta"), "traceparent"); jsonrpc.IsString(tp) {
				how += " " + string(tp[1:len(tp)-1])
			}
			// A result with a resultType of the server's own is decoded
			// and rebuilt on its way (upstream.plainResult), not passed
			// on as its bytes.
			rt := ""
			if bytes.Contains(m.Params, []byte(`"rebuild"`)) {
				rt = `,"resultType":"input_required"`
			}
			out = append(out, `,"result":{"content":[{"type":"text","text":"`+how+`"}]`+rt+`}}`...)
		default:
			out = append(out, `,"result":{}}`...)
		}
		out = append(out, '\n')
		if _, err := p.Out.Write(out); err != nil {
			return 0
		}
	}
}

// fastSession is a raw client of ServeStdio on f, initialized, with the
// tools listed (which starts the pooled servers).
type fastSession struct {
	in  io.WriteCloser
	out *bufio.Reader
}

func newFastSession(tb testing.TB, f *fixture) *fastSession {
	return newFastSessionAt(tb, f, "2025-06-18")
}

// newFastSessionAt is newFastSession for a client of protocol version
// (a modern one's calls go through the bridge, bridge.go).
func newFastSessionAt(tb testing.TB, f *fixture, version string) *fastSession {
	tb.Helper()
	cin, sout := io.Pipe()
	sin, cout := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeStdio(ctx, f.b, sin, sout) }()
	s := &fastSession{in: cout, out: bufio.NewReaderSize(cin, 64<<10)}
	tb.Cleanup(func() {
		_ = cout.Close()
		cancel()
		go func() { _, _ = io.Copy(io.Discard, cin) }()
		<-done
	})
	s.roundTrip(tb, `{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`, `"i"`)
	s.send(tb, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.roundTrip(tb, `{"jsonrpc":"2.0","id":"l","method":"tools/list"}`, `"l"`)
	return s
}

func (s *fastSession) send(tb testing.TB, frame string) {
	if _, err := io.WriteString(s.in, frame+"\n"); err != nil {
		tb.Fatal(err)
	}
}

// roundTrip sends frame and reads lines up to the answer to id.
func (s *fastSession) roundTrip(tb testing.TB, frame, id string) []byte {
	s.send(tb, frame)
	for {
		line, err := s.out.ReadSlice('\n')
		if err != nil {
			tb.Fatalf("waiting for %s: %v", id, err)
		}
		if m, ok := jsonrpc.Scan(bytes.TrimSpace(line)); ok && string(m.ID) == id {
			return line
		}
	}
}

const echoConfig = `{"permissions": {"allow": ["*"]}, "mcps": {"echo": {"image": "example/echo@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "command": "srv", "workspace": "none"}}}`

func newEchoFixture(tb testing.TB) *fixture {
	f := newFixture(tb, echoConfig)
	f.rt.Behave = func(p *containertest.Proc) int {
		if p.Spec.Labels["pml.purpose"] == "mcp:echo" {
			return rawEchoServer(p)
		}
		return fakeContainer(p)
	}
	return f
}

// BenchmarkFastPathCall: one warm call at a time through the fast path.
func BenchmarkFastPathCall(b *testing.B) { benchFastPath(b) }

// BenchmarkFastPathCallModern: the same from a client of MCP 2026-07-28
// (as the go-sdk's client of make bench is), whose calls run beside
// their request (the bridge).
func BenchmarkFastPathCallModern(b *testing.B) { benchFastPathAt(b, modernVersion) }

// BenchmarkFastPathCallTraced: the same with traces and metrics on,
// exported over OTLP/HTTP to a receiver on loopback (as `make bench`'s
// telemetry row has them).
func BenchmarkFastPathCallTraced(b *testing.B) {
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(recv.Close)
	s := telemetry.Settings{Endpoint: recv.URL, FromConfig: true}
	stop, err := telemetry.Setup(context.Background(), s, "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	_, stopMetrics, err := telemetry.MetricsSetup(context.Background(), s, "bench", false)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stopMetrics)
	benchFastPath(b)
}

func benchFastPath(b *testing.B) { benchFastPathAt(b, "2025-06-18") }

func benchFastPathAt(b *testing.B, version string) {
	s := newFastSessionAt(b, newEchoFixture(b), version)
	call := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo:echo","arguments":{"text":"x"}}}` + "\n")
	first := s.roundTrip(b, string(call[:len(call)-1]), "7")
	if !bytes.Contains(first, []byte(`"text":"fast`)) { // (traced: "fast <traceparent>")
		b.Logf("the call did not take the fast path: %s", first)
	}
	// Each call its own id, as a client's are: an id still in flight
	// (its answer is written before its entry goes) takes the usual path.
	head, tail := []byte(`{"jsonrpc":"2.0","id":`), call[len(`{"jsonrpc":"2.0","id":7`):]
	frame := make([]byte, 0, len(call)+20)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		frame = append(strconv.AppendInt(append(frame[:0], head...), int64(100+i), 10), tail...)
		if _, err := s.in.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := s.out.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFastPathCallAnswersAsTheServerDid: the benchmark's session is what
// it means to measure: the call's answer is the server's result under
// the client's id, and every call is audited.
func TestFastPathCallAnswersAsTheServerDid(t *testing.T) {
	s := newFastSession(t, newEchoFixture(t))
	got := s.roundTrip(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo:echo","arguments":{"text":"x"}}}`, "7")
	if want := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"fast"}]}}` + "\n"; string(got) != want {
		t.Errorf("answer %s, want %s", got, want)
	}
}

// TestAModernFastPathCallWhoseResultIsRebuiltIsAnswered: a modern
// client's call whose result is not passed on as the server's bytes (the
// server wrote a resultType of its own) is answered with the rebuilt
// result, once, with pml's resultType.
func TestAModernFastPathCallWhoseResultIsRebuiltIsAnswered(t *testing.T) {
	s := newFastSessionAt(t, newEchoFixture(t), modernVersion)
	for i := range 3 {
		id := strconv.Itoa(i)
		got := string(s.roundTrip(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"echo:echo","arguments":{"text":"rebuild"}}}`, id))
		if strings.Count(got, `"resultType"`) != 1 || !strings.Contains(got, `"resultType":"complete"`) || !strings.Contains(got, `"text":"fast"`) {
			t.Errorf("call %d: %s", i, got)
		}
	}
}

// TestFastPathCallsAreTraced: with traces on, a call still takes the
// fast path and gives the spans the go-sdk's path gives: the request's
// server span (continuing the client's traceparent) with the
// conventions' attributes and the permission's decision (an event), and
// under it pml's client span to the server, whose id the server was sent
// in its traceparent; nothing else.
func TestFastPathCallsAreTraced(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	t.Cleanup(telemetry.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), "test"))
	fastCallTraced(t, rec)
}

// TestFastPathCallsAreTracedBySpansMadeAtTheirEnd: the same, with the
// provider pml makes, whose request spans are made when they end
// (internal/telemetry's pending.go).
func TestFastPathCallsAreTracedBySpansMadeAtTheirEnd(t *testing.T) {
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	rec := tracetest.NewSpanRecorder()
	t.Cleanup(telemetry.UseProcessor(rec, "test"))
	fastCallTraced(t, rec)
}

func fastCallTraced(t *testing.T, rec *tracetest.SpanRecorder) {
	s := newFastSession(t, newEchoFixture(t))
	const trace, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	got := s.roundTrip(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo:echo","arguments":{"text":"x"},"_meta":{"traceparent":"00-`+trace+`-`+parent+`-01"}}}`, "7")
	if !bytes.Contains(got, []byte(`"text":"fast `)) {
		t.Fatalf("with traces on, the call did not take the fast path: %s", got)
	}
	var server, client sdktrace.ReadOnlySpan
	byName := map[string]sdktrace.ReadOnlySpan{}
	waitFor := time.Now().Add(5 * time.Second)
	for (server == nil || client == nil) && time.Now().Before(waitFor) {
		for _, sp := range rec.Ended() {
			byName[sp.Name()] = sp
			if sp.Name() == "tools/call echo:echo" && sp.SpanKind() == oteltrace.SpanKindServer {
				server = sp
			}
		}
		client = byName["tools/call echo"]
		time.Sleep(10 * time.Millisecond)
	}
	if server == nil {
		t.Fatalf("no server span tools/call echo:echo among %v", spanNames(byName))
	}
	attrs := func(sp sdktrace.ReadOnlySpan) map[string]string {
		m := map[string]string{}
		for _, a := range sp.Attributes() {
			m[string(a.Key)] = a.Value.String()
		}
		return m
	}
	for k, v := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo:echo", "gen_ai.operation.name": "execute_tool",
		"network.transport": "pipe", "mcp.protocol.version": "2025-06-18"} {
		if a := attrs(server); a[k] != v {
			t.Errorf("server span %s = %q, want %q", k, a[k], v)
		}
	}
	if server.SpanContext().TraceID().String() != trace || server.Parent().SpanID().String() != parent {
		t.Errorf("the server span does not continue the client's trace: trace %s parent %s", server.SpanContext().TraceID(), server.Parent().SpanID())
	}
	if a := attrs(server); a["pml.tool"] != "" {
		t.Errorf("server span pml.tool = %q for a wire name that is pml's own", a["pml.tool"])
	}
	// The permission's decision is an event of the server span.
	var permit map[string]string
	for _, e := range server.Events() {
		if e.Name == "pml.permit" {
			permit = map[string]string{}
			for _, a := range e.Attributes {
				permit[string(a.Key)] = a.Value.String()
			}
		}
	}
	if permit["pml.decision"] != "allow" || permit["pml.pattern"] != "*" {
		t.Errorf("server span: pml.permit event %v, want decision allow by pattern *", permit)
	}
	if client == nil || client.SpanKind() != oteltrace.SpanKindClient || client.SpanContext().TraceID().String() != trace || attrs(client)["pml.server"] != "echo" {
		t.Fatalf("no client span tools/call echo in the call's trace: %v", spanNames(byName))
	}
	if client.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Errorf("the client span is not under the server span")
	}
	// The server continues the trace under pml's client span.
	if sent := "00-" + trace + "-" + client.SpanContext().SpanID().String() + "-01"; !bytes.Contains(got, []byte(`"text":"fast `+sent+`"`)) {
		t.Errorf("the server was sent another trace context than %s: %s", sent, got)
	}
	if !client.StartTime().Before(client.EndTime()) || client.StartTime().Before(server.StartTime()) || client.EndTime().After(server.EndTime()) {
		t.Errorf("client span %v to %v, not within the server span's %v to %v", client.StartTime(), client.EndTime(), server.StartTime(), server.EndTime())
	}
	// A warm call to a pooled server makes these two spans and no other
	// (every span costs every traced call: make bench's telemetry row).
	var inCall []string
	for _, sp := range rec.Ended() {
		if sp.SpanContext().TraceID().String() == trace {
			inCall = append(inCall, sp.Name())
		}
	}
	if len(inCall) != 2 {
		t.Errorf("the warm call made %d spans %v, want the server span and the client span", len(inCall), inCall)
	}
}

func spanNames(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
