package upstream

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/container/containertest"
	"github.com/rs/zerolog"
)

// stub is the shared fake runtime (containertest) whose "containers" run
// behave: it gets the container's stdin and writes its stdout and stderr.
func stub(behave func(stdin io.Reader, stdout, stderr io.Writer, killed <-chan struct{}) int) *containertest.Runtime {
	return &containertest.Runtime{Behave: func(p *containertest.Proc) int {
		return behave(p.In, p.Out, p.Err, p.Killed())
	}}
}

func TestAServerThatNeverAnswersTimesOut(t *testing.T) {
	rt := stub(func(stdin io.Reader, stdout, stderr io.Writer, killed <-chan struct{}) int {
		io.WriteString(stderr, "loading a very large model\n")
		go func() { _, _ = io.Copy(io.Discard, stdin) }() // reads, never answers
		<-killed
		return 137
	})
	s := New(Options{Name: "slow", Runtime: rt, StartTimeout: 300 * time.Millisecond, Logger: zerolog.Nop()})
	_, err := s.Tools(context.Background())
	if err == nil || !strings.Contains(err.Error(), "did not finish initialize within 300ms") || !strings.Contains(err.Error(), "loading a very large model") {
		t.Fatalf("got %v", err)
	}
	if len(rt.Removed()) != 1 {
		t.Fatalf("the container was removed %d times, want 1", len(rt.Removed()))
	}
}

func TestAServerThatExitsAtStartIsReported(t *testing.T) {
	rt := stub(func(stdin io.Reader, stdout, stderr io.Writer, killed <-chan struct{}) int {
		io.WriteString(stderr, "error: missing API key\n")
		return 1
	})
	s := New(Options{Name: "broken", Runtime: rt, Logger: zerolog.Nop()})
	_, err := s.Tools(context.Background())
	var ce *CrashError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "exited while starting (exit code 1)") || !strings.Contains(err.Error(), "missing API key") {
		t.Fatalf("got %v", err)
	}
	if s.Running() {
		t.Fatal("a crashed server counts as running")
	}
}

func TestAClosedServerRefusesCalls(t *testing.T) {
	s := New(Options{Name: "gone", Runtime: &containertest.Runtime{}, Logger: zerolog.Nop()})
	s.Close()
	if _, err := s.Call(context.Background(), "x", nil, nil, nil, nil); err == nil || !strings.Contains(err.Error(), "shut down") {
		t.Fatalf("got %v", err)
	}
}
