//go:build linux

package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// pml serve serves Prometheus metrics on /metrics, under the token rules
// of /mcp: the calls by outcome and the conventions' server durations.
func TestPMLServeServesPrometheusMetrics(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:read_file"], "deny": ["shell:*"]}}`)
	ws.write("a.txt", "a")
	url, token := startServe(t, ws)
	metrics := strings.TrimSuffix(url, "/mcp") + "/metrics"
	cs := httpSession(t, url, token)
	if _, res := callC(t, cs, "shell:exec", map[string]any{"command": "true"}); !res.IsError {
		t.Fatal("shell:exec was not denied")
	}
	if out, res := callC(t, cs, "filesystem:read_file", map[string]any{"path": "a.txt"}); res.IsError {
		t.Fatalf("read: %s", out)
	}

	get := func(auth, origin string) (int, string) {
		req, _ := http.NewRequest("GET", metrics, nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	if code, _ := get("", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: %d", code)
	}
	if code, _ := get("wrong", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics with a wrong token: %d", code)
	}
	if code, _ := get(token, "https://evil.example"); code != http.StatusForbidden {
		t.Errorf("/metrics from another origin: %d", code)
	}
	code, body := get(token, "")
	for _, want := range []string{`pml_calls_total{`, `pml_outcome="denied"`, `pml_outcome="allowed"`, `mcp_server_operation_duration_seconds_count{`, `mcp_method_name="tools/call"`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics: %d, no %s in\n%s", code, want, body)
		}
	}
}

// An OTLP endpoint that accepts connections and never answers, or one
// where nothing listens, neither slows nor fails a call, and pml still
// exits promptly when its client goes.
func TestAnUnreachableTraceEndpointNeverSlowsOrFailsACall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() { // accepts, reads nothing, answers nothing
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	for _, ep := range []string{"http://" + ln.Addr().String(), fmt.Sprintf("http://127.0.0.1:%d", freePort(t))} {
		ws := newWorkspace(t, `{"permissions": {"deny": ["shell:*"]}}`)
		s := startSession(t, ws, "OTEL_EXPORTER_OTLP_ENDPOINT="+ep, "OTEL_BSP_SCHEDULE_DELAY=10", "OTEL_METRIC_EXPORT_INTERVAL=10")
		if !s.logs("exporting traces and metrics over OTLP") {
			t.Fatalf("%s: telemetry did not start:\n%s", ep, s.stderr.String())
		}
		var worst time.Duration
		for i := 0; i < 20; i++ {
			began := time.Now()
			if _, res := s.call(t, "shell:exec", map[string]any{"command": "true"}); !res.IsError {
				t.Fatal("shell:exec was not denied")
			}
			worst = max(worst, time.Since(began))
			time.Sleep(20 * time.Millisecond)
		}
		// A refused call takes milliseconds; an export in its way would
		// take the exporter's 10 s timeout.
		if worst > 2*time.Second {
			t.Errorf("%s: the slowest of 20 calls took %v", ep, worst)
		}
		began := time.Now()
		s.Close()
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Errorf("%s: pml still running 15 s after its client went", ep)
		}
		if d := time.Since(began); d > 10*time.Second {
			t.Errorf("%s: pml took %v to exit", ep, d)
		}
	}
}

// .pml.json's telemetry.endpoint sends the traces of a session there once
// the person trusted the file; a cloned repository's endpoint, untrusted,
// receives nothing (it would learn what tools ran, and when).
func TestATelemetryEndpointInPmlJSONNeedsTrust(t *testing.T) {
	var mu sync.Mutex
	paths := map[string]int{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		paths[r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(recv.Close)
	got := func(p string) int {
		mu.Lock()
		defer mu.Unlock()
		return paths[p]
	}
	policy := fmt.Sprintf(`{"permissions": {"deny": ["shell:*"]}, "telemetry": {"endpoint": %q}}`, recv.URL+"/")

	untrusted := newWorkspace(t, "")
	untrusted.writeUntrusted(".pml.json", policy)
	s := startSession(t, untrusted, "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_METRIC_EXPORT_INTERVAL=50")
	s.call(t, "shell:exec", map[string]any{"command": "true"})
	s.Close()
	if n := got("/v1/traces") + got("/v1/metrics"); n != 0 {
		t.Fatalf("an untrusted telemetry.endpoint received %d exports", n)
	}

	trusted := newWorkspace(t, policy)
	s = startSession(t, trusted, "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_METRIC_EXPORT_INTERVAL=50")
	s.call(t, "shell:exec", map[string]any{"command": "true"})
	waitFor(t, "traces and metrics at the trusted endpoint", 15*time.Second, func() bool {
		return got("/v1/traces") > 0 && got("/v1/metrics") > 0
	})
}
