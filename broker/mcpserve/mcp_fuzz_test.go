package mcpserve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/telemetry"
	"github.com/pml-dev/pml/internal/wirename"
)

// The modes of one FuzzMCP input (its uint8), as bits.
const (
	fuzzTelemetry  = 1 << iota // traces and metrics on (an OTLP sink on loopback, Prometheus in memory)
	fuzzHTTP                   // over pml serve's Streamable HTTP handler, else pml stdio's ServeStdio
	fuzzBeforeInit             // the frame comes before initialize (HTTP: without a session)
)

// fuzzMethods are the methods a client can send (and a few it cannot),
// each sent by the seeds with params in every shape of fuzzParams.
var fuzzMethods = []string{
	"initialize", "ping", "tools/list", "tools/call", "notifications/initialized",
	"notifications/cancelled", "notifications/progress", "notifications/roots/list_changed",
	"resources/list", "resources/templates/list", "resources/read", "resources/subscribe",
	"resources/unsubscribe", "prompts/list", "prompts/get", "completion/complete",
	"logging/setLevel", "roots/list", "sampling/createMessage", "elicitation/create", "no/such/method",
}

// fuzzParams: absent, null, {}, wrong types, huge, and _meta of every
// shape ("" is "no params member").
var fuzzParams = []string{
	"", `null`, `{}`, `[]`, `5`, `"x"`, `true`, `{"_meta":null}`, `{"_meta":{}}`, `{"_meta":7}`,
	`{"_meta":"x"}`, `{"_meta":[]}`, `{"_meta":{"progressToken":{}}}`, `{"_meta":{"progressToken":1.5}}`,
	`{"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"a=b"}}`,
	`{"_meta":{"traceparent":5,"tracestate":{}}}`, `{"_meta":{"traceparent":"zz"}}`,
	`{"x":"` + strings.Repeat("é", 40000) + `"}`,
	`{"name":"` + wirename.Encode("filesystem:read_file") + `","arguments":{"path":"a.txt"},"_meta":{"progressToken":"p"}}`,
	`{"name":"` + wirename.Encode("filesystem:write_file") + `","arguments":{"path":"b.txt","content":"x"}}`,
	`{"name":"` + wirename.Encode("filesystem:read_file") + `","arguments":null}`,
	`{"name":7,"arguments":[]}`, `{"name":"nope"}`, `{"requestId":"x","reason":"y"}`, `{"progressToken":"p","progress":"x"}`,
	`{"protocolVersion":"2026-07-28","capabilities":{"elicitation":{}},"clientInfo":{"name":"f","version":"1"}}`,
	`{"protocolVersion":5,"capabilities":[],"clientInfo":null}`, `{"level":"debug"}`, `{"uri":"file:///etc/passwd"}`,
}

// FuzzMCP is pml's MCP surface end to end, in process: a raw JSON-RPC
// frame sent to the server pml builds (the fixture's broker, its fake
// runtime), over pml stdio's ServeStdio (the frame filter, the fast
// front, the go-sdk session) or pml serve's Streamable HTTP handler (with
// its bearer token), with telemetry on or off, before or after
// initialize. Whatever the frame: nothing panics (a panic in a goroutine
// ends the fuzz process; one recovered by a boundary, pml's or net/http's,
// is found in the logs and fails too: a recovered panic is still a bug),
// a request with a usable id gets exactly one answer, and a ping after it
// is still answered.
func FuzzMCP(f *testing.F) {
	i := 0
	for _, m := range fuzzMethods {
		for _, p := range fuzzParams {
			f.Add(fuzzFrame(`"f-1"`, m, p), uint8(i%8))
			i++
		}
	}
	// The frames of issue 40: no params, telemetry on.
	for mode := range uint8(8) {
		f.Add(`{"jsonrpc":"2.0","id":1,"method":"ping"}`, mode)
		f.Add(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, mode)
	}
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"},"params":{}}`,
		`{"jsonrpc":"2.0","ID":3,"method":"ping"}`, `{"jsonrpc":"2.0","id":9223372036854775807,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"","method":"tools/list","params":{"cursor":"zzz"}}`,
		`{"jsonrpc":"2.0","id":4,"result":{}}`, `{"jsonrpc":"2.0","id":5,"error":{"code":"x"}}`, `garbage`, `[]`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"` + call.ContinueTool + `","arguments":{"workflow_id":"","approved":true}}}`,
	} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(fuzzTelemetry|fuzzHTTP))
	}

	var logs lockedBuffer
	fx := newLoggedFixture(f, `{"permissions": {"allow": ["filesystem:read_*", "filesystem:list_*"], "ask": ["*"]}}`, &logs)
	srv := httptest.NewUnstartedServer(NewHTTPHandler(fx.b, "fuzz-token"))
	// net/http recovers a handler's panic and logs it here.
	srv.Config.ErrorLog = log.New(&logs, "", 0)
	srv.Start()
	f.Cleanup(srv.Close)
	tel := newTelemetrySwitch(f)

	f.Fuzz(func(t *testing.T, frame string, mode uint8) {
		tel.set(t, mode&fuzzTelemetry != 0)
		frame = strings.ReplaceAll(frame, "\n", " ")
		want, ok := requestID(frame)
		if ok && (want == idKey(json.RawMessage(`"pml-fuzz-init"`)) || want == idKey(json.RawMessage(`"pml-fuzz-ping"`))) {
			t.Skip("the frame uses the target's own ids")
		}
		if mode&fuzzHTTP != 0 {
			fuzzOverHTTP(t, srv.URL, frame, want, ok, mode&fuzzBeforeInit != 0)
		} else {
			fuzzOverStdio(t, fx.b, frame, want, ok, mode&fuzzBeforeInit != 0)
		}
		if m := logs.panicked(); m != "" {
			t.Fatalf("pml recovered from a panic on %q (mode %d): %s", frame, mode, m)
		}
	})
}

func fuzzFrame(id, method, params string) string {
	s := `{"jsonrpc":"2.0"`
	if !strings.HasPrefix(method, "notifications/") {
		s += `,"id":` + id
	}
	s += `,"method":"` + method + `"`
	if params != "" {
		s += `,"params":` + params
	}
	return s + "}"
}

const fuzzInit = `{"jsonrpc":"2.0","id":"pml-fuzz-init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`
const fuzzInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
const fuzzPing = `{"jsonrpc":"2.0","id":"pml-fuzz-ping","method":"ping"}`

// requestID is the id a frame's answer must carry: the frame is one JSON
// object with a "method" member, no member twice, and an id that is a
// string or an integer (what JSON-RPC and pml's filter allow). Frames that
// are not (garbage, a duplicate member) are answered with a null id, which
// cannot be told apart; notifications and responses get no answer.
func requestID(frame string) (string, bool) {
	dec := json.NewDecoder(strings.NewReader(frame))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	seen := map[string]bool{}
	var id json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		k, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil || seen[k] {
			return "", false
		}
		seen[k] = true
		if k == "id" {
			id = v
		}
	}
	if _, err := dec.Token(); err != nil || dec.More() || !seen["method"] || id == nil {
		return "", false
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", false // something after the object
	}
	k := idKey(id)
	return k, k != ""
}

var intID = regexp.MustCompile(`^-?[0-9]+$`)

// idKey is an id as a key ("" when it is neither a string nor an int64).
func idKey(id json.RawMessage) string {
	var s string
	if json.Unmarshal(id, &s) == nil {
		return "s:" + s
	}
	t := string(bytes.TrimSpace(id))
	if !intID.MatchString(t) {
		return ""
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return ""
	}
	return "n:" + strconv.FormatInt(n, 10)
}

// answers counts the responses (not pml's own requests) among frames,
// by id key.
func answers(frames [][]byte) map[string]int {
	n := map[string]int{}
	for _, fr := range frames {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method *string         `json:"method"`
		}
		if json.Unmarshal(fr, &m) != nil || m.Method != nil || m.ID == nil {
			continue
		}
		n[idKey(m.ID)]++
	}
	return n
}

const fuzzWait = 20 * time.Second

func fuzzOverStdio(t *testing.T, b Backend, frame, want string, hasID, beforeInit bool) {
	cin, sout := io.Pipe()
	sin, cout := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- ServeStdio(ctx, b, sin, sout) }()
	var mu sync.Mutex
	var got [][]byte
	arrived := make(chan struct{}, 64)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(cin)
		sc.Buffer(nil, 32<<20)
		for sc.Scan() {
			mu.Lock()
			got = append(got, bytes.Clone(sc.Bytes()))
			mu.Unlock()
			select {
			case arrived <- struct{}{}:
			default:
			}
		}
		_, _ = io.Copy(io.Discard, cin)
	}()
	wrote := make(chan error, 1)
	send := func(lines ...string) {
		go func() {
			var err error
			for _, l := range lines {
				if _, err = io.WriteString(cout, l+"\n"); err != nil {
					break
				}
			}
			wrote <- err
		}()
		select {
		case err := <-wrote:
			if err != nil {
				t.Fatalf("pml stopped reading: %v", err)
			}
		case <-time.After(fuzzWait):
			t.Fatalf("pml stopped reading its input (frame %q)", frame)
		}
	}
	until := func(what string, done func(map[string]int) bool) {
		deadline := time.After(fuzzWait)
		for {
			mu.Lock()
			ok := done(answers(got))
			mu.Unlock()
			if ok {
				return
			}
			select {
			case <-arrived:
			case err := <-served:
				t.Fatalf("pml stdio ended (%v) waiting for %s after %q", err, what, frame)
			case <-deadline:
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("no answer %s within %s after %q; pml wrote %q", what, fuzzWait, frame, got)
			}
		}
	}
	if !beforeInit {
		send(fuzzInit)
		until("to initialize", func(n map[string]int) bool { return n["s:pml-fuzz-init"] > 0 })
		send(fuzzInitialized)
	}
	send(frame, fuzzPing)
	until("to the ping after the frame", func(n map[string]int) bool { return n["s:pml-fuzz-ping"] > 0 })
	if hasID {
		until("to the frame's id "+want, func(n map[string]int) bool { return n[want] > 0 })
	}
	// The client leaves; what pml wrote until then is all it wrote.
	_ = cout.Close()
	select {
	case <-served:
	case <-time.After(fuzzWait):
		t.Fatalf("pml stdio did not end when its client left (frame %q)", frame)
	}
	_ = sout.Close()
	<-read
	n := answers(got)
	if n["s:pml-fuzz-ping"] != 1 || hasID && n[want] != 1 {
		t.Fatalf("frame %q: %d answers to its id %s, %d to the ping; pml wrote %q", frame, n[want], want, n["s:pml-fuzz-ping"], got)
	}
}

// fuzzOverHTTP sends the frame in a session of its own (or, beforeInit,
// in no session), then a ping in a new session.
func fuzzOverHTTP(t *testing.T, url, frame, want string, hasID, beforeInit bool) {
	session := ""
	if !beforeInit {
		session = httpSession(t, url)
		defer httpEnd(url, session)
	}
	status, frames, body := httpPost(t, url, session, frame)
	if status >= 500 {
		t.Fatalf("frame %q: HTTP %d %q", frame, status, body)
	}
	if n := answers(frames)[want]; hasID && n != 1 && !(n == 0 && status >= 400) {
		// An HTTP error status is the transport's answer to a frame it
		// refuses (no session, a body it cannot decode).
		t.Fatalf("frame %q: %d answers to its id %s (HTTP %d): %q", frame, n, want, status, body)
	}
	if session == "" {
		session = httpSession(t, url)
		defer httpEnd(url, session)
	}
	_, frames, body = httpPost(t, url, session, fuzzPing)
	if answers(frames)["s:pml-fuzz-ping"] != 1 {
		t.Fatalf("after %q, a ping got %q", frame, body)
	}
}

func httpSession(t *testing.T, url string) string {
	t.Helper()
	req := httpRequest(t, "POST", url, "", fuzzInit)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: HTTP %d, session %q: %q", resp.StatusCode, id, body)
	}
	if status, _, body := httpPost(t, url, id, fuzzInitialized); status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: HTTP %d %q", status, body)
	}
	return id
}

func httpEnd(url, session string) {
	req, _ := http.NewRequest("DELETE", url, nil)
	req.Header.Set("Authorization", "Bearer fuzz-token")
	req.Header.Set("Mcp-Session-Id", session)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

func httpRequest(t *testing.T, method, url, session, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer fuzz-token")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	return req
}

// httpPost returns the status, the JSON-RPC messages of the answer (a
// JSON body or an event stream's data lines) and the body.
func httpPost(t *testing.T, url, session, frame string) (int, [][]byte, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fuzzWait)
	defer cancel()
	resp, err := http.DefaultClient.Do(httpRequest(t, "POST", url, session, frame).WithContext(ctx))
	if err != nil {
		t.Fatalf("frame %q: %v", frame, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("frame %q: the answer: %v (so far %q)", frame, err, body)
	}
	var frames [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, l := range strings.Split(string(body), "\n") {
			if d, ok := strings.CutPrefix(l, "data:"); ok {
				frames = append(frames, []byte(strings.TrimSpace(d)))
			}
		}
	} else if json.Valid(body) {
		frames = append(frames, body)
	}
	return resp.StatusCode, frames, body
}

// lockedBuffer is pml's log during the fuzzing.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// recoveredPanic is what a recovered panic leaves in a log: a stack (from
// debug.Stack: the runtime's panic frames), net/http's "http: panic
// serving", or a field named panic.
var recoveredPanic = regexp.MustCompile(`runtime/panic\.go|goroutine [0-9]+ \[running\]|http: panic serving|"panic":`)

// panicked returns the log's line that tells of a recovered panic, and
// empties the log.
func (l *lockedBuffer) panicked() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.buf.Reset()
	if loc := recoveredPanic.FindIndex(l.buf.Bytes()); loc != nil {
		s := l.buf.String()
		start := max(0, loc[0]-300)
		return s[start:min(len(s), loc[1]+2000)]
	}
	return ""
}

// telemetrySwitch turns pml's telemetry on and off as pml turns it on:
// traces through the OTLP/HTTP exporter to a sink on loopback that
// accepts everything, metrics into a Prometheus registry in memory.
type telemetrySwitch struct {
	sink *httptest.Server
	stop func()
}

func newTelemetrySwitch(f *testing.F) *telemetrySwitch {
	s := &telemetrySwitch{sink: httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))}
	f.Cleanup(func() {
		if s.stop != nil {
			s.stop()
		}
		s.sink.Close()
	})
	return s
}

func (s *telemetrySwitch) set(t *testing.T, on bool) {
	if on == (s.stop != nil) {
		return
	}
	if !on {
		s.stop()
		s.stop = nil
		return
	}
	ctx := context.Background()
	stopTraces, err := telemetry.Setup(ctx, telemetry.Settings{Endpoint: s.sink.URL, FromConfig: true}, "fuzz")
	if err != nil {
		t.Fatal(err)
	}
	_, stopMetrics, err := telemetry.MetricsSetup(ctx, telemetry.Settings{}, "fuzz", true)
	if err != nil {
		stopTraces()
		t.Fatal(err)
	}
	if !telemetry.Enabled() || !telemetry.Active() {
		t.Fatal("telemetry did not turn on")
	}
	s.stop = func() { stopTraces(); stopMetrics() }
}
