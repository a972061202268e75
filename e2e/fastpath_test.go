//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/wirename"
)

// fastRawClient speaks newline-delimited JSON-RPC to `pml stdio` by hand, so
// a test sees the frames exactly as pml writes them: which ids are
// answered, in what order, and the bytes of a result.
type fastRawClient struct {
	t      *testing.T
	in     io.WriteCloser
	stderr *syncBuffer

	mu     sync.Mutex
	frames [][]byte
	more   chan struct{}
}

// startFastRaw starts pml stdio on ws, with env added to its environment,
// and initializes a session on protocol 2025-06-18.
func startFastRaw(t *testing.T, ws *workspace, env ...string) *fastRawClient {
	t.Helper()
	cmd := exec.Command(pmlBin, "stdio", "--log-format", "json", "--log-level", "debug")
	cmd.Env = append(append(os.Environ(), "PML_WORKSPACE="+ws.Dir), env...)
	c := &fastRawClient{t: t, stderr: &syncBuffer{}, more: make(chan struct{}, 1)}
	cmd.Stderr = c.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.in = in
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 32<<20)
		for sc.Scan() {
			c.mu.Lock()
			c.frames = append(c.frames, append([]byte(nil), sc.Bytes()...))
			c.mu.Unlock()
			select {
			case c.more <- struct{}{}:
			default:
			}
		}
	}()
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	c.wait(`"init"`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c.send(`{"jsonrpc":"2.0","id":"list","method":"tools/list"}`)
	c.wait(`"list"`)
	return c
}

func (c *fastRawClient) send(frame string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, frame+"\n"); err != nil {
		c.t.Fatalf("writing to pml: %v", err)
	}
}

// call sends a tools/call of tool (pml's name) with id (raw JSON) and
// args; meta, when not empty, is the raw _meta object.
func (c *fastRawClient) call(id, tool string, args map[string]any, meta string) {
	c.t.Helper()
	a, _ := json.Marshal(args)
	m := ""
	if meta != "" {
		m = `,"_meta":` + meta
	}
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s%s}}`, id, wirename.Encode(tool), a, m))
}

// fastFrame is one frame pml wrote, with its members raw.
type fastFrame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
	index   int
	raw     []byte
}

// find returns the first frame (from the start) that matches.
func (c *fastRawClient) find(match func(f fastFrame) bool) (fastFrame, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, b := range c.frames {
		var f fastFrame
		if err := json.Unmarshal(b, &f); err != nil {
			c.t.Fatalf("pml wrote a line that is not JSON: %q", b)
		}
		f.index, f.raw = i, b
		if match(f) {
			return f, true
		}
	}
	return fastFrame{}, false
}

// waitFrame waits for a frame that matches.
func (c *fastRawClient) waitFrame(what string, match func(f fastFrame) bool) fastFrame {
	c.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		if f, ok := c.find(match); ok {
			return f
		}
		select {
		case <-c.more:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			c.t.Fatalf("no %s from pml within 60s; stderr:\n%s", what, c.stderr.String())
		}
	}
}

// wait waits for the answer to id (raw JSON).
func (c *fastRawClient) wait(id string) fastFrame {
	c.t.Helper()
	return c.waitFrame("answer to "+id, func(f fastFrame) bool {
		return string(f.ID) == id && f.Method == "" && (f.Result != nil || f.Error != nil)
	})
}

// text is the answer's text and whether it is an error result.
func (f fastFrame) text(t *testing.T) (string, bool) {
	t.Helper()
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if f.Result == nil || json.Unmarshal(f.Result, &r) != nil {
		t.Fatalf("not a tool result: %s", f.raw)
	}
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n"), r.IsError
}

// auditCounts counts the audit entries of each tool.
func auditCounts(t *testing.T, ws *workspace) map[string]int {
	t.Helper()
	raw, err := os.ReadFile(ws.path(".pml/audit.jsonl"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e struct {
			Tool string `json:"tool"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		n[e.Tool]++
	}
	return n
}

// TestFastPathForwardsCallsAsBytes drives calls to a pooled server through
// pml's fast path (forwarded as bytes) and checks what a client sees:
// results passed on byte for byte, progress under the client's own token,
// answers in the order the server gives them, a cancelled call stopped in
// the server and never answered, a timeout, a crash mid-call reported and
// the server restarted; and exactly one audit entry for every call.
func TestFastPathForwardsCallsAsBytes(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, "")[:len(probeConfig(t, ""))-1]+`, "sandbox": {"timeout": "4s"}}`)
	c := startFastRaw(t, ws)
	calls := map[string]int{}
	call := func(id, tool string, args map[string]any, meta string) {
		calls[tool]++
		c.call(id, tool, args, meta)
	}

	// The result goes on as the server wrote it: numbers a decode into
	// Go values would change (an integer past float64, "1.50") arrive
	// as they were.
	call("1", "probe:exact", nil, "")
	if a := c.wait("1"); !bytes.Contains(a.Result, []byte(`12345678901234567891`)) || !bytes.Contains(a.Result, []byte(`1.50`)) {
		t.Errorf("the result was not passed on as the server sent it: %s", a.raw)
	}

	// Progress under the client's own (numeric) token, before the answer.
	call("2", "probe:sleep", map[string]any{"ms": 600, "steps": 3, "tag": "p"}, `{"progressToken":77}`)
	answer := c.wait("2")
	if out, isErr := answer.text(t); isErr || out != "slept p" {
		t.Errorf("sleep with progress: %q", out)
	}
	prog, ok := c.find(func(f fastFrame) bool {
		return f.Method == "notifications/progress" && bytes.Contains(f.Params, []byte(`"progressToken":77`))
	})
	if !ok || prog.index > answer.index {
		t.Errorf("no progress with the client's token before the answer (found %v)", ok)
	}
	if _, stray := c.find(func(f fastFrame) bool {
		return f.Method == "notifications/progress" && bytes.Contains(f.Params, []byte(`pml-`))
	}); stray {
		t.Error("a progress notification carried pml's own token")
	}

	// Out of order: the server answers the short calls first; every
	// answer carries its own caller's id.
	call(`"a"`, "probe:sleep", map[string]any{"ms": 1500, "tag": "a"}, "")
	call(`"b"`, "probe:sleep", map[string]any{"ms": 50, "tag": "b"}, "")
	call(`"c"`, "probe:echo", map[string]any{"text": "c"}, "")
	fa, fb, fc := c.wait(`"a"`), c.wait(`"b"`), c.wait(`"c"`)
	for _, x := range []struct {
		f    fastFrame
		want string
	}{{fa, "slept a"}, {fb, "slept b"}, {fc, "c"}} {
		if out, _ := x.f.text(t); out != x.want {
			t.Errorf("answer %s: %q, want %q", x.f.ID, out, x.want)
		}
	}
	if fb.index > fa.index || fc.index > fa.index {
		t.Errorf("answers came in the order they were sent (a %d, b %d, c %d), not as the server gave them", fa.index, fb.index, fc.index)
	}

	// Cancellation: the client's notifications/cancelled reaches the
	// server under pml's id; the call is never answered.
	call(`"x"`, "probe:sleep", map[string]any{"ms": 60000, "steps": 600, "tag": "x"}, `{"progressToken":"tx"}`)
	c.waitFrame("progress of the call to cancel", func(f fastFrame) bool {
		return f.Method == "notifications/progress" && bytes.Contains(f.Params, []byte(`"progressToken":"tx"`))
	})
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x","reason":"test"}}`)
	for i := 0; ; i++ {
		id := fmt.Sprintf(`"n%d"`, i)
		call(id, "probe:cancelled", nil, "")
		if out, _ := c.wait(id).text(t); out == "1" {
			break
		}
		if i == 100 {
			t.Fatal("the server never saw the cancellation")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A timeout (sandbox.timeout) is an error result naming it.
	call(`"t"`, "probe:sleep", map[string]any{"ms": 20000, "tag": "t"}, "")
	if out, isErr := c.wait(`"t"`).text(t); !isErr || !strings.Contains(out, "timed out") {
		t.Errorf("a call past sandbox.timeout: %q", out)
	}

	// A crash mid-call: a clear error, and the next call restarts it.
	call(`"k"`, "probe:crash", nil, "")
	if out, isErr := c.wait(`"k"`).text(t); !isErr || !strings.Contains(out, "exit code 3") || !strings.Contains(out, "probe: crashing on request") {
		t.Errorf("a crash mid-call: %q", out)
	}
	call(`"after"`, "probe:echo", map[string]any{"text": "after"}, "")
	if out, _ := c.wait(`"after"`).text(t); out != "after" {
		t.Errorf("the call after the crash: %q", out)
	}

	if _, answered := c.find(func(f fastFrame) bool { return string(f.ID) == `"x"` }); answered {
		t.Error("the cancelled call was answered")
	}
	// One audit entry per call, whatever its end (the entry follows the
	// answer: wait for the count, then check it is not more).
	var got map[string]int
	waitFor(t, "one audit entry per call", 10*time.Second, func() bool {
		got = auditCounts(t, ws)
		for tool, n := range calls {
			if got[tool] < n {
				return false
			}
		}
		return true
	})
	for tool, n := range calls {
		if got[tool] != n {
			t.Errorf("%s: %d audit entries for %d calls", tool, got[tool], n)
		}
	}
}
