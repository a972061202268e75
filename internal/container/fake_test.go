package container

import (
	"context"
	"fmt"
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
	// procs are the started processes, in order; startErr fails Start.
	procs    []*fakeProcess
	startErr error
	// agent, when set, runs instead of behave and knows its process.
	agent func(p *fakeProcess, stdin io.Reader, stdout, stderr io.Writer) int
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
	if f.startErr != nil {
		f.mu.Unlock()
		return nil, f.startErr
	}
	f.started++
	f.lastSpec = spec
	id := fmt.Sprintf("c%d", f.started)
	r, w := io.Pipe()
	p := &fakeProcess{rt: f, id: id, stdinR: r, stdinW: w, killed: make(chan struct{}), done: make(chan int, 1)}
	f.procs = append(f.procs, p)
	f.mu.Unlock()
	out, errw := s.Stdout, s.Stderr
	if out == nil {
		out = io.Discard
	}
	if errw == nil {
		errw = io.Discard
	}
	go func() {
		var code int
		if f.agent != nil {
			code = f.agent(p, r, out, errw)
		} else {
			code = f.behave(r, out, errw, p.killed)
		}
		// Like a real process that exited: later stdin writes do not
		// block (they are drained until Kill closes the pipe).
		go func() { _, _ = io.Copy(io.Discard, r) }()
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

// isRemoved reports whether the container id was removed.
func (f *fakeRuntime) isRemoved(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.removed {
		if r == id {
			return true
		}
	}
	return false
}

// startedIDs lists the ids of every started process.
func (f *fakeRuntime) startedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]string, 0, len(f.procs))
	for _, p := range f.procs {
		ids = append(ids, p.id)
	}
	return ids
}

func (f *fakeRuntime) proc(id string) *fakeProcess {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.procs {
		if p.id == id {
			return p
		}
	}
	return nil
}
