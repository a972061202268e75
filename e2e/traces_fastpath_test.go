//go:build linux && traces

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/wirename"
)

// TestTracesOfFastPathCallsReachJaeger: with traces on, calls to a pooled
// server still take the stdio fast path (the result's bytes pass on as
// the server wrote them, which the go-sdk's path cannot do), and each
// still gives its trace: the request's server span by the conventions'
// name and attributes, continuing the client's traceparent, with the
// permission's decision as its event pml.permit; pml's client span to
// the server right under it, whose id is the traceparent the server
// got, and no other span of pml's; and the server and client operation
// durations among pml's metrics.
func TestTracesOfFastPathCallsReachJaeger(t *testing.T) {
	j := startJaeger(t)
	svc := fmt.Sprintf("pml-e2e-fast-%d", time.Now().UnixNano())
	ws := newWorkspace(t, probeConfig(t, `, "workspace": "none"`))
	c := startFastRaw(t, ws, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+j.otlp, "OTEL_SERVICE_NAME="+svc,
		"OTEL_BSP_SCHEDULE_DELAY=200", "OTEL_METRIC_EXPORT_INTERVAL=500")

	const clientTrace, clientSpan = "5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8"
	c.call(`"exact"`, "probe:exact", nil, `{"traceparent":"00-`+clientTrace+`-`+clientSpan+`-01","app":"kept"}`)
	if a := c.wait(`"exact"`); !bytes.Contains(a.Result, []byte(`12345678901234567891`)) || !bytes.Contains(a.Result, []byte(`1.50`)) {
		t.Fatalf("with traces on, the call did not take the fast path (its result was decoded and encoded again): %s", a.raw)
	}
	c.call(`"traced"`, "probe:traced", map[string]any{"text": "secret-probe-arg"}, "")
	got, _ := c.wait(`"traced"`).text(t)
	if !strings.HasPrefix(got, "traceparent: 00-") {
		t.Fatalf("probe:traced: the server got no traceparent: %q", got)
	}
	parts := strings.Split(strings.TrimPrefix(got, "traceparent: "), "-")
	if len(parts) != 4 {
		t.Fatalf("probe:traced: %q", got)
	}

	byTool := map[string]jTrace{}
	waitSaw(t, "the two calls' traces in Jaeger", 30*time.Second, func() (bool, string) {
		for _, tr := range j.traces(t, svc) {
			for _, sp := range tr.Spans {
				if strings.HasPrefix(sp.OperationName, "tools/call ") && sp.tag("span.kind") == "server" {
					byTool[sp.tag("gen_ai.tool.name")] = tr
				}
			}
		}
		return len(byTool) >= 2, fmt.Sprint(len(byTool), " traces: ", traceKeys(byTool))
	})

	check := func(tool, server string) (jTrace, jSpan) {
		t.Helper()
		wire := wirename.Encode(tool)
		tr, ok := byTool[wire]
		if !ok {
			t.Fatalf("no trace of %s (%s) in %v", tool, wire, traceKeys(byTool))
		}
		var rs jSpan
		for _, sp := range tr.named("tools/call " + wire) {
			if sp.tag("span.kind") == "server" {
				rs = sp
			}
		}
		for k, v := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": wire, "gen_ai.operation.name": "execute_tool",
			"network.transport": "pipe", "mcp.protocol.version": "2025-06-18"} {
			if rs.tag(k) != v {
				t.Errorf("%s: server span %s = %q, want %q", tool, k, rs.tag(k), v)
			}
		}
		under := func(name string) jSpan {
			t.Helper()
			for _, sp := range tr.named(name) {
				if sp.parent() == rs.SpanID {
					return sp
				}
			}
			t.Fatalf("%s: no span %s under the request's; spans: %s", tool, name, spanTree(tr))
			return jSpan{}
		}
		if p := rs.event("pml.permit"); p["pml.decision"] != "allow" || p["pml.pattern"] == "" {
			t.Errorf("%s: the server span's pml.permit event %v", tool, p)
		}
		cs := []jSpan{under("tools/call " + server)}
		if cs[0].tag("span.kind") != "client" {
			t.Fatalf("%s: tools/call %s is not a client span; spans: %s", tool, server, spanTree(tr))
		}
		// A warm call to a pooled server: the request's span and pml's
		// client span, nothing else of pml's (each span costs every
		// traced call); the server's own span may be there too.
		var ours []string
		for _, sp := range tr.Spans {
			if tr.service(sp) == svc {
				ours = append(ours, sp.OperationName)
			}
		}
		if len(ours) != 2 {
			t.Errorf("%s: pml made %d spans %v for a warm call, want the server span and the client span; spans: %s", tool, len(ours), ours, spanTree(tr))
		}
		if cs[0].tag("pml.server") != "probe" || cs[0].tag("gen_ai.tool.name") != server || cs[0].tag("mcp.method.name") != "tools/call" {
			t.Errorf("%s: client span tags %+v", tool, cs[0].Tags)
		}
		return tr, cs[0]
	}

	// The client's trace continues through the forwarded call.
	exact, _ := check("probe:exact", "exact")
	if exact.TraceID != clientTrace {
		t.Errorf("probe:exact: trace %s, want the client's %s", exact.TraceID, clientTrace)
	}
	for _, sp := range exact.Spans {
		if sp.tag("span.kind") == "server" && sp.parent() != clientSpan {
			t.Errorf("probe:exact: the server span's parent %q, want the client's %s", sp.parent(), clientSpan)
		}
	}
	// The server continues pml's client span.
	traced, cs := check("probe:traced", "traced")
	if parts[1] != traced.TraceID || parts[2] != cs.SpanID {
		t.Errorf("probe:traced: the server got traceparent %q, want trace %s span %s (pml's client span)", got, traced.TraceID, cs.SpanID)
	}
	for _, tr := range byTool {
		if b, _ := json.Marshal(tr); strings.Contains(string(b), "secret") {
			t.Errorf("an argument value in the trace %s", tr.TraceID)
		}
	}

	// Both operation durations of tools/call reach the collector.
	waitSaw(t, "the fast path's operation durations at Jaeger's Prometheus exporter", 30*time.Second, func() (bool, string) {
		r, err := http.Get("http://" + j.prom + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		server, client := false, false
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `mcp_method_name="tools/call"`) && strings.Contains(line, `gen_ai_tool_name="exact"`) {
				client = client || strings.HasPrefix(line, "mcp_client_operation_duration")
			}
			if strings.Contains(line, `mcp_method_name="tools/call"`) && strings.Contains(line, `gen_ai_tool_name="`+wirename.Encode("probe:exact")+`"`) {
				server = server || strings.HasPrefix(line, "mcp_server_operation_duration")
			}
		}
		return server && client, tailOf(string(b))
	})
}
