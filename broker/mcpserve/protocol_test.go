package mcpserve

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawStdio is pml stdio's session driven line by line.
type rawStdio struct {
	t    *testing.T
	in   io.WriteCloser
	out  *bufio.Scanner
	logs *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newRawStdio(t *testing.T) *rawStdio {
	t.Helper()
	logs := &syncBuffer{}
	f := newLoggedFixture(t, "", logs)
	cin, sout := io.Pipe()
	sin, cout := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeStdio(ctx, f.b, sin, sout) }()
	t.Cleanup(func() {
		cancel()
		_ = cout.Close()
		_ = cin.Close()
		<-done
	})
	sc := bufio.NewScanner(cin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return &rawStdio{t: t, in: cout, out: sc, logs: logs}
}

// send writes one line and returns the next line pml writes.
func (r *rawStdio) send(line string) string {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatal(err)
	}
	return r.next()
}

func (r *rawStdio) notify(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawStdio) next() string {
	r.t.Helper()
	got := make(chan string, 1)
	go func() {
		if r.out.Scan() {
			got <- r.out.Text()
		}
		close(got)
	}()
	select {
	case l, ok := <-got:
		if !ok {
			r.t.Fatal("pml stdio closed its output")
		}
		return l
	case <-time.After(10 * time.Second):
		r.t.Fatal("no answer from pml stdio in 10 s")
	}
	return ""
}

// initialize agrees on revision asked and returns the revision answered.
func (r *rawStdio) initialize(asked string) string {
	r.t.Helper()
	line := r.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + asked + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	var res struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(line), &res); err != nil || res.Result.ProtocolVersion == "" {
		r.t.Fatalf("initialize answered %s", line)
	}
	r.notify(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return res.Result.ProtocolVersion
}

// An initialize on a revision pml does not know is answered with the
// latest it offers there, and the log says which and why.
func TestInitializeOnAnUnknownRevisionIsLogged(t *testing.T) {
	r := newRawStdio(t)
	got := r.initialize("1999-01-01")
	if got != "2025-11-25" {
		t.Fatalf("answered revision %s, want 2025-11-25", got)
	}
	logs := r.logs.String()
	if !strings.Contains(logs, `"asked":"1999-01-01"`) || !strings.Contains(logs, `"agreed":"2025-11-25"`) ||
		!strings.Contains(logs, "does not know that revision") {
		t.Fatalf("the log does not say which revision was chosen and why:\n%s", logs)
	}
}

// errorOf returns the code and message of a JSON-RPC error line.
func errorOf(t *testing.T, line string) (int, string) {
	t.Helper()
	var r struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil || r.Error == nil {
		t.Fatalf("not a JSON-RPC error: %s", line)
	}
	return r.Error.Code, r.Error.Message
}

const twoPings = `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}},{"jsonrpc":"2.0","id":2,"method":"ping"}]`

// On 2025-03-26, the revision with batches, pml stdio answers a batch
// with an array of its answers (it refused every batch), as pml serve
// does; the session goes on.
func TestStdioTakesABatchOn20250326(t *testing.T) {
	r := newRawStdio(t)
	if got := r.initialize("2025-03-26"); got != "2025-03-26" {
		t.Fatalf("agreed %s", got)
	}
	line := r.send(twoPings)
	var answers []struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(line), &answers); err != nil || len(answers) != 2 || answers[0].ID+answers[1].ID != 3 ||
		answers[0].Result == nil || answers[1].Result == nil {
		t.Fatalf("batch answered %s", line)
	}
	// An id a batch used before is refused whole, and the session lives.
	if code, msg := errorOf(t, r.send(`[{"jsonrpc":"2.0","id":2,"method":"ping"}]`)); code != -32600 || !strings.Contains(msg, "reuses") {
		t.Fatalf("reused id: %d %s", code, msg)
	}
	if code, msg := errorOf(t, r.send(`[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"1.0","id":4,"method":"ping"}]`)); code != -32600 || !strings.Contains(msg, "message 2") {
		t.Fatalf("bad element: %d %s", code, msg)
	}
	if line := r.send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`); !strings.Contains(line, `"id":5,"result"`) {
		t.Fatalf("ping after the batches: %s", line)
	}
}

// From 2025-06-18 on, and before initialize, a batch is refused with a
// JSON-RPC error that says why, and the session goes on.
func TestStdioRefusesABatchFrom20250618(t *testing.T) {
	r := newRawStdio(t)
	if code, msg := errorOf(t, r.send(twoPings)); code != -32600 || !strings.Contains(msg, "after initialize") {
		t.Fatalf("before initialize: %d %s", code, msg)
	}
	r.initialize("2025-06-18")
	if code, msg := errorOf(t, r.send(twoPings)); code != -32600 || !strings.Contains(msg, "removed in MCP protocol 2025-06-18") {
		t.Fatalf("on 2025-06-18: %d %s", code, msg)
	}
	if line := r.send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`); !strings.Contains(line, `"id":5,"result"`) {
		t.Fatalf("ping after the batch: %s", line)
	}
}
