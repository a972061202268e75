//go:build linux && traces

package e2e

// The traces of a session checked through a real trace backend: Jaeger v2
// (github.com/jaegertracing/jaeger/cmd/jaeger, built from the Go module
// proxy by e2e/traces/build.sh and cached; `make test-traces` runs this
// file, tag traces). pml exports over OTLP/HTTP to Jaeger's receiver; the
// test reads the traces back through Jaeger's query API, and pml's
// metrics through the Prometheus exporter of the same Jaeger process.

import (
	stdcmp "cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type jaeger struct {
	query, otlp, prom string
	out               *syncBuffer
}

// startJaeger runs Jaeger v2 on loopback ports of its own: OTLP/HTTP in,
// spans in memory, the query API, and a metrics pipeline to a
// Prometheus endpoint.
func startJaeger(t *testing.T) *jaeger {
	t.Helper()
	bin := os.Getenv("PML_JAEGER_BIN")
	if bin == "" {
		t.Fatal("PML_JAEGER_BIN is not set: run `make test-traces`, which builds Jaeger (e2e/traces/build.sh) and sets it")
	}
	j := &jaeger{
		query: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		otlp:  fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		prom:  fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		out:   &syncBuffer{},
	}
	grpcQuery := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
    metrics:
      receivers: [otlp]
      exporters: [prometheus]
  telemetry:
    metrics:
      level: none
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: %s
    grpc:
      endpoint: %s
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
  prometheus:
    endpoint: %s
`, j.query, grpcQuery, j.otlp, j.prom)
	path := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", "file:"+path)
	cmd.Stdout, cmd.Stderr = j.out, j.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	waitSaw(t, "Jaeger's query API", 60*time.Second, func() (bool, string) {
		r, err := http.Get("http://" + j.query + "/api/services")
		if err != nil {
			return false, j.out.String()
		}
		r.Body.Close()
		return r.StatusCode == 200, j.out.String()
	})
	return j
}

type jSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	// Logs are the span's events, the event's name in the field
	// "event".
	Logs []struct {
		Fields []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"fields"`
	} `json:"logs"`
	ProcessID string `json:"processID"`
	StartTime int64  `json:"startTime"` // µs
	Duration  int64  `json:"duration"`  // µs
}

// event returns the attributes of the span's event named name (nil when
// it has none).
func (s jSpan) event(name string) map[string]string {
	for _, l := range s.Logs {
		m := map[string]string{}
		for _, f := range l.Fields {
			m[f.Key] = fmt.Sprint(f.Value)
		}
		if m["event"] == name {
			return m
		}
	}
	return nil
}

type jTrace struct {
	TraceID   string  `json:"traceID"`
	Spans     []jSpan `json:"spans"`
	Processes map[string]struct {
		Service string `json:"serviceName"`
	} `json:"processes"`
}

func (s jSpan) tag(k string) string {
	for _, t := range s.Tags {
		if t.Key == k {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

func (s jSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

func (tr jTrace) named(name string) []jSpan {
	var out []jSpan
	for _, s := range tr.Spans {
		if s.OperationName == name {
			out = append(out, s)
		}
	}
	return out
}

func (tr jTrace) service(s jSpan) string { return tr.Processes[s.ProcessID].Service }

func (j *jaeger) traces(t *testing.T, service string) []jTrace {
	t.Helper()
	r, err := http.Get("http://" + j.query + "/api/traces?limit=100&lookback=1h&service=" + service)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var body struct {
		Data []jTrace `json:"data"`
	}
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("Jaeger's answer: %v\n%s", err, b)
	}
	return body.Data
}

// TestTracesOfASessionReachJaeger: a toolbox call (whose client sent a
// traceparent), a call asked and approved in the client's dialog, a call
// to a pooled server that continues _meta.traceparent, and a refused
// call give traces in Jaeger with the conventions' names and attributes,
// the steps that did work as child spans, the pooled server's own span in
// the same trace; no argument value anywhere; pml's metrics reach
// Jaeger's collector too.
func TestTracesOfASessionReachJaeger(t *testing.T) {
	j := startJaeger(t)
	svc := fmt.Sprintf("pml-e2e-%d", time.Now().UnixNano())
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["filesystem:read_file", "probe:*"], "ask": ["filesystem:write_file"], "deny": ["shell:*"]},
  "mcps": {"probe": {"image": %q, "workspace": "none", "env": {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
    "network": {"allow": [%q], "forward": {"127.0.0.1:4318": %q}}}}}`, probeImage(t), j.otlp, j.otlp))
	ws.write("a.txt", "secret-file-content")
	opts := &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		time.Sleep(300 * time.Millisecond) // a person reading the question
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "continue"}}, nil
	}}
	// On protocol 2025-06-18 pml asks through elicitation while the call
	// waits: the person's time is a span of the call's own trace.
	cmd := exec.Command(pmlBin, "stdio", "--log-format", "json", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir,
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+j.otlp, "OTEL_SERVICE_NAME="+svc,
		"OTEL_BSP_SCHEDULE_DELAY=200", "OTEL_METRIC_EXPORT_INTERVAL=500")
	cmd.Stderr = &syncBuffer{}
	cs0, err := mcp.NewClient(&mcp.Implementation{Name: "pml-e2e-traces", Version: "test"}, opts).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
	if err != nil {
		t.Fatal(err)
	}
	s := &session{ClientSession: cs0, cmd: cmd, stderr: cmd.Stderr.(*syncBuffer)}
	t.Cleanup(func() { s.Close() })

	const clientTrace, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx := context.Background()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "filesystem:read_file", Arguments: map[string]any{"path": "a.txt"},
		Meta: mcp.Meta{"traceparent": "00-" + clientTrace + "-" + clientSpan + "-01"}})
	if err != nil || res.IsError {
		t.Fatalf("read: %v %v", err, text(res))
	}
	if out, res := s.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "secret-written"}); res.IsError {
		t.Fatalf("write, approved in the dialog: %s", out)
	}
	out, res := s.call(t, "probe:traced", map[string]any{"text": "secret-probe-arg"})
	if res.IsError || !strings.HasPrefix(out, "traceparent: 00-") {
		t.Fatalf("probe:traced: %s", out)
	}
	if out, res := s.call(t, "shell:exec", map[string]any{"command": "echo secret-command"}); !res.IsError {
		t.Fatalf("shell:exec not refused: %s", out)
	}

	byTool := map[string]jTrace{}
	waitSaw(t, "the four calls' traces in Jaeger", 30*time.Second, func() (bool, string) {
		for _, tr := range j.traces(t, svc) {
			for _, sp := range tr.Spans {
				if strings.HasPrefix(sp.OperationName, "tools/call ") && sp.tag("span.kind") == "server" && tr.service(sp) == svc {
					byTool[sp.tag("gen_ai.tool.name")] = tr
				}
			}
		}
		return len(byTool) >= 4, fmt.Sprint(len(byTool), " traces: ", traceKeys(byTool))
	})

	server := func(tr jTrace, tool string) jSpan {
		t.Helper()
		ss := tr.named("tools/call " + tool)
		for _, sp := range ss {
			if sp.tag("span.kind") == "server" && tr.service(sp) == svc {
				for k, v := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": tool, "gen_ai.operation.name": "execute_tool", "network.transport": "pipe"} {
					if sp.tag(k) != v {
						t.Errorf("%s: server span %s = %q, want %q", tool, k, sp.tag(k), v)
					}
				}
				if sp.tag("mcp.protocol.version") == "" {
					t.Errorf("%s: no mcp.protocol.version", tool)
				}
				return sp
			}
		}
		t.Fatalf("no server span tools/call %s in %+v", tool, tr)
		return jSpan{}
	}
	child := func(tr jTrace, of jSpan, name string) jSpan {
		t.Helper()
		for _, sp := range tr.named(name) {
			if sp.parent() == of.SpanID {
				return sp
			}
		}
		t.Fatalf("no span %s under %s", name, of.OperationName)
		return jSpan{}
	}

	// The toolbox read continues the client's trace.
	read := byTool["filesystem:read_file"]
	rs := server(read, "filesystem:read_file")
	if read.TraceID != clientTrace || rs.parent() != clientSpan {
		t.Errorf("the read's trace %s (parent %s), want the client's %s (parent %s)", read.TraceID, rs.parent(), clientTrace, clientSpan)
	}
	if p := rs.event("pml.permit"); p["pml.decision"] != "allow" {
		t.Errorf("read: pml.permit event %v", p)
	}
	child(read, rs, "pml.execute")

	// The write: the person's answer and time, then the run.
	write := byTool["filesystem:write_file"]
	ws2 := server(write, "filesystem:write_file")
	if p := ws2.event("pml.permit"); p["pml.decision"] != "ask" {
		t.Errorf("write: pml.permit event %v", p)
	}
	var approve jSpan
	for _, sp := range write.named("pml.approve") {
		approve = sp
	}
	if approve.tag("pml.approval.answer") != "continue" {
		t.Errorf("write: pml.approve %+v", approve)
	}
	if len(write.named("pml.execute")) != 1 {
		t.Errorf("write: no pml.execute after the approval")
	}

	// The pooled server: pml's client span carries the trace into the
	// server, whose own span is in the same trace, under it.
	probe := byTool["probe:traced"]
	ps := server(probe, "probe:traced")
	var clientSpans []jSpan
	for _, sp := range probe.named("tools/call traced") {
		if sp.tag("span.kind") == "client" && probe.service(sp) == svc {
			clientSpans = append(clientSpans, sp)
		}
	}
	if len(clientSpans) != 1 {
		t.Fatalf("probe: %d client spans tools/call traced", len(clientSpans))
	}
	cs := clientSpans[0]
	if cs.tag("mcp.method.name") != "tools/call" || cs.tag("gen_ai.tool.name") != "traced" || cs.tag("pml.server") != "probe" {
		t.Errorf("probe: client span tags %+v", cs.Tags)
	}
	var theirs []jSpan
	for _, sp := range probe.Spans {
		if probe.service(sp) == "probe" {
			theirs = append(theirs, sp)
		}
	}
	if len(theirs) != 1 || theirs[0].parent() != cs.SpanID || theirs[0].OperationName != "tools/call traced" {
		t.Errorf("probe: the server's own span is not under pml's client span: %+v (client span %s)", theirs, cs.SpanID)
	}
	// No execute span for a pooled server: the client span is under the
	// request's. A wait for the server's container (when the call came
	// before the container was up) is pml.container.acquire; a call that
	// found it running has none (the pool's start may have won the race).
	if cs.parent() != ps.SpanID || len(probe.named("pml.execute")) != 0 {
		t.Errorf("probe: the client span is not right under the request's, or an execute span: %s", spanTree(probe))
	}
	for _, acq := range probe.named("pml.container.acquire") {
		if acq.tag("pml.pool.hit") != "false" || acq.tag("pml.server") != "probe" {
			t.Errorf("probe: pml.container.acquire %+v; spans: %s", acq.Tags, spanTree(probe))
		}
	}

	// The refused call: an error, no execution.
	denied := byTool["shell:exec"]
	ds := server(denied, "shell:exec")
	if ds.tag("error.type") != "tool_error" || ds.tag("otel.status_code") != "ERROR" {
		t.Errorf("denied: error.type %q status %q", ds.tag("error.type"), ds.tag("otel.status_code"))
	}
	if p := ds.event("pml.permit"); p["pml.decision"] != "deny" {
		t.Errorf("denied: pml.permit event %v", p)
	}
	if len(denied.named("pml.execute")) != 0 {
		t.Errorf("denied: the refused call has an execute span")
	}

	// PML_TRACE_TREE names a file for the span trees of the write and
	// probe calls, as docs/observability.md shows them.
	if f := os.Getenv("PML_TRACE_TREE"); f != "" {
		_ = os.WriteFile(f, []byte(spanTree(write)+"\n"+spanTree(probe)), 0o644)
	}

	// Names and sizes only: no argument value or file content anywhere.
	for _, tr := range byTool {
		b, _ := json.Marshal(tr)
		if strings.Contains(string(b), "secret") || strings.Contains(string(b), "a.txt") || strings.Contains(string(b), "b.txt") {
			t.Errorf("an argument value or content in the trace %s: %s", tr.TraceID, b)
		}
	}

	// The metrics reach the same Jaeger process (its collector's
	// Prometheus exporter shows what it received over OTLP).
	waitSaw(t, "pml's metrics at Jaeger's Prometheus exporter", 30*time.Second, func() (bool, string) {
		r, err := http.Get("http://" + j.prom + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		m := string(b)
		return strings.Contains(m, "mcp_server_operation_duration") && strings.Contains(m, `pml_outcome="denied"`) &&
			strings.Contains(m, "mcp_client_operation_duration") && strings.Contains(m, "pml_pool"), tailOf(m)
	})
}

func traceKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func tailOf(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}

// spanTree draws a trace as an indented tree: each span's service, name,
// offset from the trace's start and duration.
func spanTree(tr jTrace) string {
	kids := map[string][]jSpan{}
	ids := map[string]bool{}
	var t0 int64
	for _, sp := range tr.Spans {
		ids[sp.SpanID] = true
		if t0 == 0 || sp.StartTime < t0 {
			t0 = sp.StartTime
		}
	}
	for _, sp := range tr.Spans {
		p := sp.parent()
		if !ids[p] {
			p = ""
		}
		kids[p] = append(kids[p], sp)
	}
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		ks := kids[parent]
		slices.SortFunc(ks, func(a, c jSpan) int { return stdcmp.Compare(a.StartTime, c.StartTime) })
		for _, sp := range ks {
			fmt.Fprintf(&b, "%-58s %-6s +%7.1f ms %8.1f ms\n", strings.Repeat("  ", depth)+sp.OperationName, tr.service(sp)[:min(5, len(tr.service(sp)))],
				float64(sp.StartTime-t0)/1000, float64(sp.Duration)/1000)
			walk(sp.SpanID, depth+1)
		}
	}
	walk("", 0)
	return b.String()
}
