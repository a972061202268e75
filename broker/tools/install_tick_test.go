package tools

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// No "still installing" line comes once the install ended: install logs
// "installed and verified" right after stop returns, so stop waits for a
// line being written.
func TestNoStillInstallingLineAfterTheInstallEnds(t *testing.T) {
	old := installTick
	installTick = time.Millisecond
	defer func() { installTick = old }()
	w := &heldWriter{entered: make(chan struct{}), release: make(chan struct{})}
	s := &Servers{progress: zerolog.New(w)}
	stop := s.stillInstalling("memory", time.Now())
	<-w.entered // a line is being written, and held there
	time.AfterFunc(20*time.Millisecond, func() { close(w.release) })
	stop()
	w.stopped.Store(true)
	time.Sleep(60 * time.Millisecond)
	if w.late.Load() {
		t.Error("a still-installing line was written after the install ended")
	}
}

// heldWriter holds its first write until release, and notes a write that
// ends after stopped is set.
type heldWriter struct {
	once             sync.Once
	entered, release chan struct{}
	stopped, late    atomic.Bool
}

func (w *heldWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered); <-w.release })
	if w.stopped.Load() {
		w.late.Store(true)
	}
	return len(p), nil
}

func TestALongInstallSaysItStillRunsEveryTick(t *testing.T) {
	var buf syncBuf
	old := installTick
	installTick = 10 * time.Millisecond
	defer func() { installTick = old }()
	s := &Servers{progress: zerolog.New(&buf)}
	stop := s.stillInstalling("memory", time.Now())
	time.Sleep(55 * time.Millisecond)
	stop()
	n := strings.Count(buf.String(), `"message":"still installing"`)
	time.Sleep(30 * time.Millisecond)
	if n < 3 || !strings.Contains(buf.String(), `"server":"memory"`) {
		t.Errorf("want a line per tick naming the server, got %d:\n%s", n, buf.String())
	}
	if after := strings.Count(buf.String(), `"message":"still installing"`); after != n {
		t.Errorf("lines went on after the install ended: %d then %d", n, after)
	}
}

// syncBuf is a log sink the test reads while lines are written.
type syncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
