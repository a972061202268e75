package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/pml-dev/pml/internal/jsonrpc"
)

// When the client closes pml's stdin, the requests it sent are still
// owed an answer: a client that writes its requests and closes its end
// (a script piping into pml stdio) reads the answers after. The go-sdk
// cancels every request in flight and writes nothing more once its
// reader ends, so the front holds the end of input back until each
// request read has been answered (drain): the calls get drainGrace to
// finish, then are stopped (their containers killed) and answer that they
// were; drainAfterCancel bounds that. Both fit in the 5 s within which
// pml exits after stdin closes (docs/engines.md).
const (
	drainGrace       = 2 * time.Second
	drainAfterCancel = 1500 * time.Millisecond
	drainPoll        = 20 * time.Millisecond
)

// owed is the set of the client's requests the go-sdk session was given
// and has not answered yet, by id.
type owed struct {
	mu  sync.Mutex
	ids map[string]bool
}

// owedKey is a request id as a key: a string by its value (the go-sdk
// encodes it anew), a number by its text.
func owedKey(raw []byte) string {
	var s string
	if jsonrpc.IsString(raw) && json.Unmarshal(raw, &s) == nil {
		return "s:" + s
	}
	return "n:" + string(bytes.TrimSpace(raw))
}

// subscriptionsListen is MCP 2026-07-28's stream of notifications, which
// the client ends by cancelling it or by going: never answered, nothing
// to wait for when the client's input ends (waiting for it held every
// modern client's pml for drainGrace and more, then warned of a request
// not answered).
var subscriptionsListen = []byte(`"subscriptions/listen"`)

// read notes a frame going to the go-sdk session: a request is owed.
func (o *owed) read(frame []byte) {
	m, ok := jsonrpc.Scan(frame)
	if !ok || m.ID == nil || m.Method == nil || bytes.Equal(m.Method, subscriptionsListen) {
		return
	}
	o.mu.Lock()
	if o.ids == nil {
		o.ids = map[string]bool{}
	}
	o.ids[owedKey(m.ID)] = true
	o.mu.Unlock()
}

// written notes a line the go-sdk session wrote: an answer pays its
// request.
func (o *owed) written(line []byte) {
	m, ok := jsonrpc.Scan(bytes.TrimSpace(line))
	if !ok || m.ID == nil || m.Method != nil {
		return
	}
	o.mu.Lock()
	delete(o.ids, owedKey(m.ID))
	o.mu.Unlock()
}

func (o *owed) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.ids)
}

// answerWriter is the go-sdk session's writer: whole lines onto out (as
// jsonrpc.Output's own writer), each answer noted as paid.
type answerWriter struct {
	out  *jsonrpc.Output
	owed *owed
	buf  []byte
}

func (w *answerWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := w.buf[:i+1]
		if err := w.out.WriteLine(line); err != nil {
			return 0, err
		}
		w.owed.written(line)
		w.buf = w.buf[i+1:]
	}
}

func (w *answerWriter) Close() error {
	if len(w.buf) > 0 {
		b := append(w.buf, '\n')
		w.buf = nil
		if err := w.out.WriteLine(b); err != nil {
			return err
		}
		w.owed.written(b)
	}
	return nil
}

var _ io.WriteCloser = (*answerWriter)(nil)

// drain waits, once the client's input has ended, until every request
// read is answered: the go-sdk session's and the fast path's. Calls still
// running after drainGrace are stopped, and answer so.
func (f *fastFront) drain() {
	drainOwed(f.ctx, f.x.get(), func() int {
		f.mu.Lock()
		n := len(f.inflight)
		f.mu.Unlock()
		return n + f.owed.count()
	})
}

// drainOwed waits until pending() is 0: up to drainGrace, then the calls
// of b still running are stopped (CancelBase) and answer so, for up to
// drainAfterCancel more.
func drainOwed(ctx context.Context, b Backend, pending func() int) {
	if pending() == 0 {
		return
	}
	log := b.Log()
	log.Info().Int("requests", pending()).Msg("the client closed its input with requests in flight: answering them before pml exits")
	wait := func(d time.Duration) bool {
		until := time.Now().Add(d)
		for pending() > 0 {
			if time.Now().After(until) || ctx.Err() != nil {
				return false
			}
			time.Sleep(drainPoll)
		}
		return true
	}
	if wait(drainGrace) {
		return
	}
	log.Info().Int("requests", pending()).Dur("after", drainGrace).Msg("stopping the calls still in flight; each answers that it was stopped")
	b.CancelBase()
	if !wait(drainAfterCancel) {
		log.Warn().Int("requests", pending()).Msg("some requests were not answered before pml exits; their calls are in the audit log")
	}
}

// drainingReader is pml run's input: the client's frames for the go-sdk
// session, whose end is held back until what was asked is answered
// (drainOwed), as the fast front does for pml stdio.
type drainingReader struct {
	ctx     context.Context
	b       Backend
	filter  *jsonrpc.Filter
	owed    owed
	pending []byte
	drained bool
}

func (d *drainingReader) Read(p []byte) (int, error) {
	for len(d.pending) == 0 {
		frame, err := d.filter.Next()
		if err != nil {
			if !d.drained {
				d.drained = true
				drainOwed(d.ctx, d.b, d.owed.count)
			}
			return 0, err
		}
		d.owed.read(frame)
		d.pending = append(frame, '\n')
	}
	n := copy(p, d.pending)
	d.pending = d.pending[n:]
	return n, nil
}

// Close closes the client's input.
func (d *drainingReader) Close() error { return d.filter.Close() }
