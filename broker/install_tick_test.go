package broker

import (
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
