package upstream

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/container"
)

// stubRuntime starts "containers" whose behaviour is a Go function: it
// gets the container's stdin and writes its stdout and stderr.
type stubRuntime struct {
	behave  func(stdin io.Reader, stdout, stderr io.Writer, killed <-chan struct{}) int
	mu      sync.Mutex
	removed int
}

type stubProc struct {
	rt     *stubRuntime
	stdin  *io.PipeWriter
	killed chan struct{}
	once   sync.Once
	done   chan int
}

func (r *stubRuntime) Start(ctx context.Context, spec container.Spec, s container.Streams) (container.Process, error) {
	pr, pw := io.Pipe()
	p := &stubProc{rt: r, stdin: pw, killed: make(chan struct{}), done: make(chan int, 1)}
	go func() {
		code := r.behave(pr, s.Stdout, s.Stderr, p.killed)
		// A process that exited reads no more: writes to its stdin fail,
		// as they do on a real container.
		pr.CloseWithError(io.ErrClosedPipe)
		p.done <- code
	}()
	return p, nil
}
func (p *stubProc) ID() string            { return "stub-container" }
func (p *stubProc) Stdin() io.WriteCloser { return p.stdin }
func (p *stubProc) Wait(ctx context.Context) (container.Exit, error) {
	select {
	case c := <-p.done:
		p.done <- c
		return container.Exit{Code: c}, nil
	case <-ctx.Done():
		return container.Exit{}, ctx.Err()
	}
}
func (p *stubProc) Kill(context.Context) error {
	p.once.Do(func() { close(p.killed) })
	return nil
}
func (p *stubProc) Remove(ctx context.Context) error {
	_ = p.Kill(ctx)
	p.rt.mu.Lock()
	p.rt.removed++
	p.rt.mu.Unlock()
	return nil
}
func (r *stubRuntime) ImageExists(context.Context, string) (bool, error) { return true, nil }
func (r *stubRuntime) ImportImage(context.Context, string, io.Reader, []string) error {
	return nil
}
func (r *stubRuntime) ListManaged(context.Context) ([]container.Managed, error) { return nil, nil }
func (r *stubRuntime) RemoveContainer(context.Context, string) error            { return nil }
func (r *stubRuntime) Info(context.Context) (container.Info, error)             { return container.Info{}, nil }
func (r *stubRuntime) Close() error                                             { return nil }

func TestAServerThatNeverAnswersTimesOut(t *testing.T) {
	rt := &stubRuntime{behave: func(stdin io.Reader, stdout, stderr io.Writer, killed <-chan struct{}) int {
		io.WriteString(stderr, "loading a very large model\n")
		go func() { _, _ = io.Copy(io.Discard, stdin) }() // reads, never answers
		<-killed
		return 137
	}}
	s := New(Options{Name: "slow", Runtime: rt, StartTimeout: 300 * time.Millisecond, Logger: zerolog.Nop()})
	_, err := s.Tools(context.Background())
	if err == nil || !strings.Contains(err.Error(), "did not finish initialize within 300ms") || !strings.Contains(err.Error(), "loading a very large model") {
		t.Fatalf("got %v", err)
	}
	if rt.removed != 1 {
		t.Fatalf("the container was removed %d times, want 1", rt.removed)
	}
}

func TestAServerThatExitsAtStartIsReported(t *testing.T) {
	rt := &stubRuntime{behave: func(stdin io.Reader, stdout, stderr io.Writer, killed <-chan struct{}) int {
		io.WriteString(stderr, "error: missing API key\n")
		return 1
	}}
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
	s := New(Options{Name: "gone", Runtime: &stubRuntime{}, Logger: zerolog.Nop()})
	s.Close()
	if _, err := s.Call(context.Background(), "x", nil, nil, nil); err == nil || !strings.Contains(err.Error(), "shut down") {
		t.Fatalf("got %v", err)
	}
}
