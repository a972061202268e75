//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP 2026-07-28 requires resultType on every result, content (an array)
// on a complete tools/call result, inputRequests or requestState (and no
// content) on one that asks, and ttlMs and cacheScope on
// server/discover and the lists. A go-sdk client is lenient about all of
// it, so these tests read the frames pml wrote, as a strict client
// (the MCP Inspector in its modern era) would.

// frameLog records the frames between a go-sdk client and `pml stdio`:
// the methods of the client's requests by id, and every line pml wrote.
type frameLog struct {
	mu      sync.Mutex
	methods map[string]string // the client's request id (raw JSON) → method
	written [][]byte          // pml's stdout, line by line
}

// results are pml's answers to the client's requests, with their methods.
func (l *frameLog) results() []loggedResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []loggedResult
	for _, line := range l.written {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(line, &m) != nil || m.ID == nil || m.Method != "" || m.Result == nil {
			continue
		}
		out = append(out, loggedResult{method: l.methods[string(m.ID)], frame: string(line), result: m.Result})
	}
	return out
}

type loggedResult struct {
	method string
	frame  string
	result json.RawMessage
}

// teeLines calls f with each whole line that goes through it.
type teeLines struct {
	buf []byte
	f   func(line []byte)
}

func (t *teeLines) add(p []byte) {
	t.buf = append(t.buf, p...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			return
		}
		t.f(append([]byte(nil), t.buf[:i]...))
		t.buf = t.buf[i+1:]
	}
}

type recordingWriter struct {
	w io.WriteCloser
	t teeLines
}

func (r *recordingWriter) Write(p []byte) (int, error) { r.t.add(p); return r.w.Write(p) }
func (r *recordingWriter) Close() error                { return r.w.Close() }

type recordingReader struct {
	r io.ReadCloser
	t teeLines
}

func (r *recordingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.t.add(p[:n])
	return n, err
}
func (r *recordingReader) Close() error { return r.r.Close() }

// startRecorded starts `pml stdio` in ws and connects client to it on
// protocol version, recording the frames both ways.
func startRecorded(t *testing.T, ws *workspace, client *mcp.Client, version string, env ...string) (*mcp.ClientSession, *frameLog, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(pmlBin, "stdio", "--log-format", "json", "--log-level", "debug")
	cmd.Env = append(append(os.Environ(), "PML_WORKSPACE="+ws.Dir), env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
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
	log := &frameLog{methods: map[string]string{}}
	w := &recordingWriter{w: in, t: teeLines{f: func(line []byte) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &m) == nil && m.ID != nil && m.Method != "" {
			log.mu.Lock()
			log.methods[string(m.ID)] = m.Method
			log.mu.Unlock()
		}
	}}}
	r := &recordingReader{r: out, t: teeLines{f: func(line []byte) {
		log.mu.Lock()
		log.written = append(log.written, line)
		log.mu.Unlock()
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: r, Writer: w}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("connecting on %s: %v\nstderr:\n%s", version, err, stderr.String())
	}
	t.Cleanup(func() {
		_ = cs.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return cs, log, stderr
}

// checkModernResults fails t for each result pml wrote that a strict
// 2026-07-28 client refuses, and returns the tools/call results.
func checkModernResults(t *testing.T, log *frameLog) []loggedResult {
	t.Helper()
	var calls []loggedResult
	for _, r := range log.results() {
		var res map[string]json.RawMessage
		if err := json.Unmarshal(r.result, &res); err != nil {
			t.Errorf("%s: the result is not an object: %s", r.method, r.frame)
			continue
		}
		var kind string
		if err := json.Unmarshal(res["resultType"], &kind); err != nil || (kind != "complete" && kind != "input_required") {
			t.Errorf("%s: no resultType \"complete\" or \"input_required\" (MCP 2026-07-28 requires it): %s", r.method, r.frame)
		}
		switch r.method {
		case "server/discover", "tools/list", "resources/list", "resources/templates/list", "prompts/list":
			var scope string
			_ = json.Unmarshal(res["cacheScope"], &scope)
			if res["ttlMs"] == nil || (scope != "public" && scope != "private") {
				t.Errorf("%s: no ttlMs and cacheScope (MCP 2026-07-28 requires them): %s", r.method, r.frame)
			}
		case "tools/call":
			calls = append(calls, r)
			switch kind {
			case "complete":
				if c := res["content"]; len(c) == 0 || c[0] != '[' {
					t.Errorf("tools/call: a complete result without content as an array: %s", r.frame)
				}
			case "input_required":
				if _, has := res["content"]; has {
					t.Errorf("tools/call: an input request with content (an InputRequiredResult has none): %s", r.frame)
				}
				if res["inputRequests"] == nil && res["requestState"] == nil {
					t.Errorf("tools/call: an input request with neither inputRequests nor requestState: %s", r.frame)
				}
			}
		}
	}
	return calls
}

func everythingConfig(allow string) string {
	return fmt.Sprintf(`{"permissions": {"allow": [%s]}, "mcps": {"everything": {"image": %q}}}`, allow, everythingImage)
}

// TestAModernClientGetsConformingResultsOverStdio: a client on MCP
// 2026-07-28 calls a server's tool over `pml stdio` on each of pml's
// paths (the fast path, which writes the server's answer as bytes; the
// go-sdk's, taken with traces on; and pml's own answer for a tool that
// no list named yet), and every result frame is one a strict client
// takes. A client on 2025-11-25 gets the same answers without resultType.
func TestAModernClientGetsConformingResultsOverStdio(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"everything": {"image": %q}, "probe": {"image": %q}}}`, everythingImage, probeImage(t)))
	greet := func(t *testing.T, cs *mcp.ClientSession) {
		t.Helper()
		out, res := callC(t, cs, "everything:greet", map[string]any{"name": "modern"})
		if res.IsError || out != "Hi modern" {
			t.Fatalf("everything:greet: %q", out)
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, nil)

	t.Run("fast path", func(t *testing.T) {
		cs, log, _ := startRecorded(t, ws, client, "2026-07-28")
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			greet(t, cs)
		}
		callC(t, cs, "probe:exact", nil)
		calls := checkModernResults(t, log)
		if len(calls) != 4 {
			t.Fatalf("%d tools/call results recorded, want 4", len(calls))
		}
		// The calls took the fast path: the server's answer went on as
		// bytes, its numbers as it wrote them (a decode would change
		// them), with resultType put in.
		if last := calls[3].frame; !strings.Contains(last, `12345678901234567891`) || !strings.Contains(last, `1.50`) {
			t.Errorf("probe:exact was not forwarded as bytes: %s", last)
		}
		// And pml names itself on them, as on the go-sdk's path
		// (SEP-2575's serverInfo, which a server SHOULD send).
		for _, c := range calls {
			if !strings.Contains(c.frame, `"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"pml"`) {
				t.Errorf("a fast path result does not name pml: %s", c.frame)
			}
		}
	})

	t.Run("a tool not listed yet", func(t *testing.T) {
		// No tools/list first: the server is not started, and pml's
		// middleware answers the call itself (it starts the server).
		cs, log, _ := startRecorded(t, ws, client, "2026-07-28")
		greet(t, cs)
		if calls := checkModernResults(t, log); len(calls) != 1 {
			t.Errorf("%d tools/call results recorded, want 1", len(calls))
		}
	})

	t.Run("fast path with traces on", func(t *testing.T) {
		recv := otlpSink(t)
		cs, log, _ := startRecorded(t, ws, client, "2026-07-28", "OTEL_EXPORTER_OTLP_ENDPOINT="+recv)
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		greet(t, cs)
		if calls := checkModernResults(t, log); len(calls) != 1 {
			t.Errorf("%d tools/call results recorded, want 1", len(calls))
		}
	})

	t.Run("legacy client unchanged", func(t *testing.T) {
		cs, log, _ := startRecorded(t, ws, client, "2025-11-25")
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		greet(t, cs)
		for _, r := range log.results() {
			if bytes.Contains(r.result, []byte(`"resultType"`)) && r.method == "tools/call" {
				t.Errorf("a 2025-11-25 client got a resultType: %s", r.frame)
			}
		}
	})
}

// TestAnApprovalRoundTripsInTheModernEra: a server's tool that asks, for
// a client on 2026-07-28 that declared elicitation: pml's question comes
// back as a conforming input request (resultType "input_required", the
// question under inputRequests as an elicitation/create with a form, the
// workflow in requestState, no content), the client calls again with the
// person's answer, and the call runs.
func TestAnApprovalRoundTripsInTheModernEra(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, everythingConfig(""))
	var asked atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			if !strings.Contains(req.Params.Message, "everything:greet") {
				t.Errorf("the question does not name the tool: %q", req.Params.Message)
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "continue"}}, nil
		},
	})
	cs, log, stderr := startRecorded(t, ws, client, "2026-07-28")
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	out, res := callC(t, cs, "everything:greet", map[string]any{"name": "approved"})
	if res.IsError || out != "Hi approved" || asked.Load() != 1 {
		t.Fatalf("after one question (asked %d times), the call should have run: %q\nstderr:\n%s", asked.Load(), out, stderr.String())
	}
	calls := checkModernResults(t, log)
	if len(calls) != 2 {
		t.Fatalf("%d tools/call results, want the question and the answer: %v", len(calls), calls)
	}
	var q struct {
		ResultType    string `json:"resultType"`
		RequestState  string `json:"requestState"`
		InputRequests map[string]struct {
			Method string `json:"method"`
			Params struct {
				Mode            string `json:"mode"`
				Message         string `json:"message"`
				RequestedSchema struct {
					Type       string `json:"type"`
					Properties map[string]struct {
						Type  string `json:"type"`
						OneOf []struct {
							Const string `json:"const"`
							Title string `json:"title"`
						} `json:"oneOf"`
					} `json:"properties"`
					Required []string `json:"required"`
				} `json:"requestedSchema"`
			} `json:"params"`
		} `json:"inputRequests"`
	}
	if err := json.Unmarshal(calls[0].result, &q); err != nil {
		t.Fatal(err)
	}
	if q.ResultType != "input_required" || q.RequestState == "" || len(q.InputRequests) != 1 {
		t.Fatalf("the question is not an input request: %s", calls[0].frame)
	}
	for _, ir := range q.InputRequests {
		d := ir.Params.RequestedSchema.Properties["decision"]
		if ir.Method != "elicitation/create" || ir.Params.Mode != "form" || ir.Params.Message == "" ||
			ir.Params.RequestedSchema.Type != "object" || d.Type != "string" || len(d.OneOf) != 3 || d.OneOf[0].Const != "continue" || d.OneOf[0].Title == "" {
			t.Errorf("the input request is not a form elicitation with titled choices: %s", calls[0].frame)
		}
	}
}

// TestAModernClientGetsCacheableServerFeatures: the prompts and resources
// pml lists and reads itself (features.go, not the go-sdk's handlers)
// carry the ttlMs and cacheScope MCP 2026-07-28 requires, as its tools
// list does; and a resource no server lists is refused with -32602 and
// the URI in data (SEP-2164). The conformance suite's caching,
// input-required-result-unsupported-methods and
// sep-2164-resource-not-found scenarios check the same through
// `pml serve --server reference`.
func TestAModernClientGetsCacheableServerFeatures(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, everythingConfig(`"everything:*"`))
	client := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, nil)
	cs, log, _ := startRecorded(t, ws, client, "2026-07-28")
	ctx := context.Background()
	if _, err := cs.ListPrompts(ctx, nil); err != nil {
		t.Fatalf("prompts/list: %v", err)
	}
	if _, err := cs.ListResources(ctx, nil); err != nil {
		t.Fatalf("resources/list: %v", err)
	}
	if _, err := cs.ListResourceTemplates(ctx, nil); err != nil {
		t.Fatalf("resources/templates/list: %v", err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "embedded:info"}); err != nil {
		t.Fatalf("resources/read embedded:info: %v", err)
	}
	const missing = "test://no-such-resource"
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: missing}); err == nil {
		t.Fatalf("resources/read %s: no error", missing)
	}
	checkModernResults(t, log)
	seen := map[string]bool{}
	for _, r := range log.results() {
		seen[r.method] = true
		if r.method != "resources/read" {
			continue
		}
		var res struct {
			TTLMs      *int   `json:"ttlMs"`
			CacheScope string `json:"cacheScope"`
		}
		if json.Unmarshal(r.result, &res) != nil || res.TTLMs == nil || (res.CacheScope != "public" && res.CacheScope != "private") {
			t.Errorf("resources/read: no ttlMs and cacheScope (MCP 2026-07-28 requires them): %s", r.frame)
		}
	}
	for _, m := range []string{"prompts/list", "resources/list", "resources/templates/list", "resources/read"} {
		if !seen[m] {
			t.Errorf("no %s result recorded", m)
		}
	}
	// The refusal: pml's own error frame for the unlisted URI.
	log.mu.Lock()
	defer log.mu.Unlock()
	var refusal string
	for _, line := range log.written {
		if bytes.Contains(line, []byte(`"error"`)) && bytes.Contains(line, []byte(missing)) {
			refusal = string(line)
		}
	}
	var e struct {
		Error struct {
			Code int `json:"code"`
			Data struct {
				URI string `json:"uri"`
			} `json:"data"`
		} `json:"error"`
	}
	if refusal == "" || json.Unmarshal([]byte(refusal), &e) != nil || e.Error.Code != -32602 || e.Error.Data.URI != missing {
		t.Errorf("resources/read of an unlisted URI: want -32602 with data.uri %q (SEP-2164), got %s", missing, refusal)
	}
}
