package upstream

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
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

// A call whose context ends while the server starts ends then, with a
// StartWaitError (nothing reached the server); the start goes on, and
// the next call gets its container without another start. A start no
// call takes stops after the idle time.
func TestACallDoesNotWaitForTheStartPastItsDeadline(t *testing.T) {
	var initialized atomic.Bool
	release := make(chan struct{})
	rt := stub(func(stdin io.Reader, stdout, stderr io.Writer, killed <-chan struct{}) int {
		<-release // a slow start: the engine, an image, the server's own
		initialized.Store(true)
		return answersTools(stdin, stdout, stderr, killed)
	})
	s := New(Options{Name: "slow", Runtime: rt, Idle: 200 * time.Millisecond, Logger: zerolog.Nop()})
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := s.Tools(ctx)
	var sw *StartWaitError
	if !errors.As(err, &sw) || !errors.Is(err, context.DeadlineExceeded) || sw.Server != "slow" {
		t.Fatalf("got %v, want a StartWaitError of the deadline", err)
	}
	if initialized.Load() {
		t.Fatal("the call waited for the start to end")
	}
	close(release)
	if _, err := s.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rt.Procs()); n != 1 {
		t.Fatalf("%d starts, want 1: the call after the abandoned one did not get its container", n)
	}

	// Abandoned, and then never called: stopped after the idle time.
	s2 := New(Options{Name: "slow2", Runtime: stub(answersTools), Idle: 100 * time.Millisecond, Logger: zerolog.Nop()})
	t.Cleanup(s2.Close)
	gone, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := s2.Tools(gone); !errors.As(err, &sw) || !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled call: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s2.Running() || s2.Starting() {
		if time.Now().After(deadline) {
			t.Fatal("the container of a start no call took is still running after its idle time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
