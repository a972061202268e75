//go:build linux

package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestACallTimedOutInTheQueueSaysSo: pml serve with sandbox.max_containers
// 2 (its least); two calls hold both containers, and a third with a 3 s
// limit waits in the queue until its time runs out. Its message says it
// waited about 3 s in the queue behind 2 calls, the cap, and what to do
// (the old one said the containers were busy, not that it queued, nor
// behind what); /metrics has the wait and the queue depth.
func TestACallTimedOutInTheQueueSaysSo(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}, "sandbox": {"max_containers": 2}}`)
	url, token := startServe(t, ws)
	holders, cancelHolders := context.WithCancel(context.Background())
	defer cancelHolders()
	done := make(chan struct{}, 2)
	for _, name := range []string{"a", "b"} {
		cs := httpSession(t, url, token)
		go func() {
			defer func() { done <- struct{}{} }()
			// Each holds its container until the test lets go.
			_, _ = cs.CallTool(holders, &mcp.CallToolParams{Name: "shell:exec",
				Arguments: map[string]any{"command": "touch " + name + ".started; sleep 50"}})
		}()
	}
	deadline := time.Now().Add(90 * time.Second)
	for !(fileExists(ws.path("a.started")) && fileExists(ws.path("b.started"))) {
		if time.Now().After(deadline) {
			t.Fatal("the two holding calls did not start within 90 s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	third := httpSession(t, url, token)
	t0 := time.Now()
	out, res := callC(t, third, "shell:exec", map[string]any{"command": "echo third-call-ran", "timeout_ms": 3000})
	took := time.Since(t0)
	if !res.IsError || strings.Contains(out, "third-call-ran") {
		t.Fatalf("the third call ran with both containers held: %s", out)
	}
	m := regexp.MustCompile(`waited (\d+\.\d) s in the queue behind 2 calls \(sandbox\.max_containers 2\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the queued call's message does not say it waited in the queue behind 2 calls (sandbox.max_containers 2):\n%s", out)
	}
	if n, _ := strconv.ParseFloat(m[1], 64); n < 2.5 || n > took.Seconds()+0.1 {
		t.Errorf("it says it waited %s s; its limit was 3 s and the call took %s:\n%s", m[1], took, out)
	}
	for _, what := range []string{"raise sandbox.max_containers", "fewer calls in parallel"} {
		if !strings.Contains(out, what) {
			t.Errorf("the message does not say %q:\n%s", what, out)
		}
	}
	if took > 6*time.Second {
		t.Errorf("the call with a 3 s limit answered after %s", took)
	}

	req, _ := http.NewRequest("GET", strings.TrimSuffix(url, "/mcp")+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	for _, want := range []string{`pml_container_queue_wait_time_seconds_count{`, `pml_outcome="deadline"`, `pml_container_queue_depth{`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics has no %s:\n%s", want, body)
		}
	}
	cancelHolders()
	for range 2 {
		<-done
	}
}

// TestACallThatQueuedThenTimedOutSaysItQueued: a call that got its
// container only after a wait in the queue, then ran out of time in it,
// says how much of its time went to the queue and what to do (the old
// message named only the limit, as if the work alone had been slow: what
// a third of the calls of 256 sessions said).
func TestACallThatQueuedThenTimedOutSaysItQueued(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}, "sandbox": {"max_containers": 2}}`)
	url, token := startServe(t, ws)
	third := httpSession(t, url, token)
	done := make(chan struct{}, 2)
	for _, name := range []string{"a", "b"} {
		cs := httpSession(t, url, token)
		go func() {
			defer func() { done <- struct{}{} }()
			_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "shell:exec",
				Arguments: map[string]any{"command": "touch " + name + ".started; sleep 2"}})
		}()
	}
	deadline := time.Now().Add(90 * time.Second)
	for !(fileExists(ws.path("a.started")) && fileExists(ws.path("b.started"))) {
		if time.Now().After(deadline) {
			t.Fatal("the two holding calls did not start within 90 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Behind them for up to 2 s, then its own sleep outlives its 8 s
	// limit.
	out, res := callC(t, third, "shell:exec", map[string]any{"command": "sleep 30", "timeout_ms": 8000})
	if !res.IsError || !strings.Contains(out, "timed out after 8s") {
		t.Fatalf("the third call did not time out after 8 s:\n%s", out)
	}
	m := regexp.MustCompile(`it had waited (\d+\.\d) s of its time in the queue behind 2 calls \(sandbox\.max_containers 2\) before it got a container: raise sandbox\.max_containers`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the message does not say the call waited in the queue first:\n%s", out)
	}
	t.Logf("the message: %s", out)
	if n, _ := strconv.ParseFloat(m[1], 64); n <= 0 || n > 8 {
		t.Errorf("it says it waited %s s in the queue:\n%s", m[1], out)
	}
	for range 2 {
		<-done
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
