// Package containertest provides an in-memory container.Runtime for tests
// of what runs on a runtime (the pool, execute, upstream, the broker): each
// "container" is a Go function playing the process. It keeps the runtime
// contract written on container.Runtime, and Contract checks that contract
// against any implementation, this fake and the Docker runtime alike.
package containertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/pml-dev/pml/internal/container"
)

// Runtime is a fake container.Runtime. Its zero value is ready: containers
// then wait for stdin to end (or a kill) and exit 0.
type Runtime struct {
	// Behave plays the container's process: it reads p.In, writes p.Out
	// and p.Err, and returns the exit code. It should return once
	// p.Killed() is closed, as a killed process would.
	Behave func(p *Proc) int
	// StartErr, when set, fails every Start.
	StartErr error
	// Managed is what ListManaged answers.
	Managed []container.Managed
	// Started, when set, receives every started process (buffer it), for
	// tests that drive containers by hand.
	Started chan *Proc

	mu      sync.Mutex
	procs   []*Proc
	removed []string
}

var _ container.Runtime = (*Runtime)(nil)

// Start starts Behave in a goroutine. It honours ctx as a real start does:
// a start whose ctx has ended fails and leaves nothing behind.
func (r *Runtime) Start(ctx context.Context, spec container.Spec, s container.Streams) (container.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.StartErr != nil {
		r.mu.Unlock()
		return nil, r.StartErr
	}
	stdin := newPipe()
	p := &Proc{
		ExitWatch: container.NewExitWatch(),
		Spec:      spec,
		In:        stdin,
		Out:       orDiscard(s.Stdout),
		Err:       orDiscard(s.Stderr),
		rt:        r,
		id:        fmt.Sprintf("c%d", len(r.procs)+1),
		stdin:     stdin,
		killed:    make(chan struct{}),
		removedC:  make(chan struct{}),
	}
	r.procs = append(r.procs, p)
	behave := r.Behave
	r.mu.Unlock()
	if behave == nil {
		behave = untilEOF
	}
	go func() {
		code := behave(p)
		// A process that exited reads no more: writes to its stdin fail,
		// as they do on a real container.
		p.stdin.Close()
		p.Finish(container.Exit{Code: code}, nil)
	}()
	if r.Started != nil {
		r.Started <- p
	}
	return p, nil
}

func untilEOF(p *Proc) int {
	_, _ = io.Copy(io.Discard, p.In)
	return 0
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// ImageExists: every image exists.
func (r *Runtime) ImageExists(context.Context, string) (bool, error) { return true, nil }

// ListManaged returns Managed.
func (r *Runtime) ListManaged(context.Context) ([]container.Managed, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]container.Managed(nil), r.Managed...), nil
}

// RemoveContainer removes a started container by id, or records the id.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	if p := r.Proc(id); p != nil {
		return p.Remove(ctx)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removed = append(r.removed, id)
	return nil
}

// Info names the fake.
func (r *Runtime) Info(context.Context) (container.Info, error) {
	return container.Info{Name: "fake"}, nil
}

// Close does nothing.
func (r *Runtime) Close() error { return nil }

// Procs lists the started processes, in order.
func (r *Runtime) Procs() []*Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Proc(nil), r.procs...)
}

// Proc is the started process with id, or nil.
func (r *Runtime) Proc(id string) *Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.procs {
		if p.id == id {
			return p
		}
	}
	return nil
}

// Last is the process started last, or nil.
func (r *Runtime) Last() *Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.procs) == 0 {
		return nil
	}
	return r.procs[len(r.procs)-1]
}

// Removed lists the ids of every removal asked for, in order (a container
// removed twice is listed twice).
func (r *Runtime) Removed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.removed...)
}

// IsRemoved reports whether id was removed.
func (r *Runtime) IsRemoved(id string) bool {
	for _, x := range r.Removed() {
		if x == id {
			return true
		}
	}
	return false
}

// Proc is one fake container: the process side (In, Out, Err, Killed) for
// Behave, and the container.Process side for the code under test.
type Proc struct {
	*container.ExitWatch
	// Spec is what the container was started with.
	Spec container.Spec
	// In is the container's stdin: it ends when pml closes its side or the
	// container is killed.
	In io.Reader
	// Out and Err are the container's stdout and stderr.
	Out, Err io.Writer

	rt         *Runtime
	id         string
	stdin      *pipe
	killed     chan struct{}
	killOnce   sync.Once
	removedC   chan struct{}
	removeOnce sync.Once
}

var _ container.Process = (*Proc)(nil)

// ErrRemoved is the Exit error of a container removed before it exited.
var ErrRemoved = errors.New("the container was removed before it exited")

// ID is "c1", "c2", … in start order.
func (p *Proc) ID() string { return p.id }

// Stdin is buffered like a socket: writing never waits for the process to
// read. Writes fail once the process has exited or was killed.
func (p *Proc) Stdin() io.WriteCloser { return p.stdin }

// Kill closes Killed and ends stdin. It is idempotent.
func (p *Proc) Kill(context.Context) error {
	p.killOnce.Do(func() {
		close(p.killed)
		p.stdin.Close()
	})
	return nil
}

// Remove kills the container and ends its watch (an exit not seen by then
// is ErrRemoved). It is idempotent; every call is recorded.
func (p *Proc) Remove(ctx context.Context) error {
	_ = p.Kill(ctx)
	p.removeOnce.Do(func() { close(p.removedC) })
	p.Finish(container.Exit{Code: 137}, ErrRemoved)
	p.rt.mu.Lock()
	p.rt.removed = append(p.rt.removed, p.id)
	p.rt.mu.Unlock()
	return nil
}

// Killed is closed by Kill (and Remove).
func (p *Proc) Killed() <-chan struct{} { return p.killed }

// WasKilled reports whether Kill or Remove was called.
func (p *Proc) WasKilled() bool {
	select {
	case <-p.killed:
		return true
	default:
		return false
	}
}

// WasRemoved reports whether Remove was called.
func (p *Proc) WasRemoved() bool {
	select {
	case <-p.removedC:
		return true
	default:
		return false
	}
}

// RemovedC is closed by the first Remove.
func (p *Proc) RemovedC() <-chan struct{} { return p.removedC }

// pipe is a buffered stdin: Close ends it for both sides (the reader reads
// what is left, then EOF; writes fail).
type pipe struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    bytes.Buffer
	closed bool
}

func newPipe() *pipe {
	p := &pipe{}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (b *pipe) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, io.ErrClosedPipe
	}
	b.buf.Write(p)
	b.cond.Broadcast()
	return len(p), nil
}

func (b *pipe) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.buf.Len() == 0 && !b.closed {
		b.cond.Wait()
	}
	if b.buf.Len() == 0 {
		return 0, io.EOF
	}
	return b.buf.Read(p)
}

func (b *pipe) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.cond.Broadcast()
	return nil
}
