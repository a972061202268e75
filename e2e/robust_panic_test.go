//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// panicMarker in a call's arguments makes a pml built with the pmlpanic
// tag panic inside the call (broker/testpanic_on.go).
const panicMarker = "pml-test-panic-now"

// A panic inside a tool call answers that call with an internal error
// naming the method and the tool, and the session (and pml) go on: the
// next call in the same session runs. Over stdio and over HTTP.
func TestAPanicInsideAToolCallAnswersThatCallAndTheSessionGoesOn(t *testing.T) {
	bin := buildPMLTags(t, "pmlpanic")
	check := func(t *testing.T, err error, logs func() string) {
		t.Helper()
		if err == nil {
			t.Fatal("the panicking call got no error")
		}
		msg := err.Error()
		for _, want := range []string{"internal error in pml", "tools/call of shell:exec", "pml kept running"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the error does not say %q: %s", want, msg)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && !strings.Contains(logs(), "goroutine ") {
			time.Sleep(50 * time.Millisecond)
		}
		out := logs()
		if n := strings.Count(out, "pml panicked while answering tools/call of shell:exec"); n != 1 {
			t.Errorf("pml's log has the panic %d times, want once, with its stack:\n%s", n, tail(out))
		}
		if !strings.Contains(out, "testPanic") {
			t.Errorf("pml's log has no stack down to the panic:\n%s", tail(out))
		}
	}
	t.Run("over stdio", func(t *testing.T) {
		ws := newWorkspace(t, allowAll)
		s := startSessionBin(t, bin, ws)
		_, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "shell:exec", Arguments: map[string]any{"command": "echo " + panicMarker}})
		check(t, err, s.stderr.String)
		out, res := s.call(t, "shell:exec", map[string]any{"command": "echo still-serving"})
		if res.IsError || !strings.Contains(out, "still-serving") {
			t.Errorf("the call after the panic: %q", out)
		}
	})
	t.Run("over stdio's fast path, a pooled server's tool", func(t *testing.T) {
		ws := newWorkspace(t, probeConfig(t, ""))
		s := startSessionBin(t, bin, ws)
		if !listsTool(t, s.ClientSession, "probe:echo") {
			t.Fatal("probe:echo is not listed")
		}
		_, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "probe:echo", Arguments: map[string]any{"text": panicMarker}})
		if err == nil || !strings.Contains(err.Error(), "tools/call of probe:echo") || !strings.Contains(err.Error(), "pml kept running") {
			t.Fatalf("the panicking call: %v\n%s", err, tail(s.stderr.String()))
		}
		out, res := s.call(t, "probe:echo", map[string]any{"text": "still-serving"})
		if res.IsError || !strings.Contains(out, "still-serving") {
			t.Errorf("the call after the panic: %q", out)
		}
	})
	t.Run("over HTTP", func(t *testing.T) {
		ws := newWorkspace(t, allowAll)
		url, token, stderr := startServeBin(t, bin, ws)
		cs := httpSession(t, url, token)
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "shell:exec", Arguments: map[string]any{"command": "echo " + panicMarker}})
		check(t, err, stderr.String)
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "shell:exec", Arguments: map[string]any{"command": "echo still-serving"}})
		if err != nil {
			t.Fatalf("the call after the panic: %v\n%s", err, tail(stderr.String()))
		}
		if b, _ := json.Marshal(res); res.IsError || !strings.Contains(string(b), "still-serving") {
			t.Errorf("the call after the panic: %s", b)
		}
		// Another session of the same pml serve is served too.
		if err := httpSession(t, url, token).Ping(context.Background(), nil); err != nil {
			t.Errorf("a new session after the panic: %v", err)
		}
		// The panic is counted, by method and tool.
		req, _ := http.NewRequest("GET", strings.TrimSuffix(url, "/mcp")+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		body, _ := io.ReadAll(r.Body)
		if !regexp.MustCompile(`pml_panics_total\{[^}]*gen_ai_tool_name="shell:exec"[^}]*mcp_method_name="tools/call"[^}]*\} 1\b`).Match(body) {
			t.Errorf("/metrics does not count the panic once:\n%s", body)
		}
	})
}
