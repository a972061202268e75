package container

import (
	"context"
	"io"
	"sync"
)

// fakeRuntime is an in-memory Runtime for unit tests. Each started process
// runs behave(stdin, stdout, stderr, killed) in a goroutine.
type fakeRuntime struct {
	mu       sync.Mutex
	behave   func(stdin io.Reader, stdout, stderr io.Writer, killed <-chan struct{}) int
	removed  []string
	managed  []Managed
	started  int
	lastSpec Spec
}

type fakeProcess struct {
	rt       *fakeRuntime
	id       string
	stdinR   *io.PipeReader
	stdinW   *io.PipeWriter
	killed   chan struct{}
	killOnce sync.Once
	done     chan int
}

func (f *fakeRuntime) Start(ctx context.Context, spec Spec, s Streams) (Process, error) {
	f.mu.Lock()
	f.started++
	f.lastSpec = spec
	id := "c" + string(rune('0'+f.started))
	f.mu.Unlock()
	r, w := io.Pipe()
	p := &fakeProcess{rt: f, id: id, stdinR: r, stdinW: w, killed: make(chan struct{}), done: make(chan int, 1)}
	out, errw := s.Stdout, s.Stderr
	if out == nil {
		out = io.Discard
	}
	if errw == nil {
		errw = io.Discard
	}
	go func() {
		code := f.behave(r, out, errw, p.killed)
		_, _ = io.Copy(io.Discard, r)
		p.done <- code
	}()
	return p, nil
}

func (p *fakeProcess) ID() string            { return p.id }
func (p *fakeProcess) Stdin() io.WriteCloser { return p.stdinW }
func (p *fakeProcess) Wait(ctx context.Context) (Exit, error) {
	select {
	case c := <-p.done:
		p.done <- c
		return Exit{Code: c}, nil
	case <-ctx.Done():
		return Exit{}, ctx.Err()
	}
}
func (p *fakeProcess) Kill(context.Context) error {
	p.killOnce.Do(func() { close(p.killed); p.stdinR.Close() })
	return nil
}
func (p *fakeProcess) Remove(ctx context.Context) error {
	_ = p.Kill(ctx)
	p.rt.mu.Lock()
	p.rt.removed = append(p.rt.removed, p.id)
	p.rt.mu.Unlock()
	return nil
}

func (f *fakeRuntime) ImageExists(context.Context, string) (bool, error) { return true, nil }
func (f *fakeRuntime) ImportImage(context.Context, string, io.Reader, []string) error {
	return nil
}
func (f *fakeRuntime) ListManaged(context.Context) ([]Managed, error) { return f.managed, nil }
func (f *fakeRuntime) RemoveContainer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, id)
	return nil
}
func (f *fakeRuntime) Info(context.Context) (Info, error) { return Info{Name: "fake"}, nil }
func (f *fakeRuntime) Close() error                       { return nil }
