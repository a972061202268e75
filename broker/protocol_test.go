package broker

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
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
	f := newFixture(t, "")
	logs := &syncBuffer{}
	f.b.log = zerolog.New(logs)
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
