package execute

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/container"
)

// fakeRuntime is a container.Runtime whose containers are driven by the
// test: each started process is handed over on procs, and the test plays
// the runner through its stdin and stdout.
type fakeRuntime struct {
	mu       sync.Mutex
	specs    []container.Spec
	startErr error
	procs    chan *fakeProc
}

func newFakeRuntime() *fakeRuntime { return &fakeRuntime{procs: make(chan *fakeProc, 16)} }

func (f *fakeRuntime) Start(_ context.Context, spec container.Spec, s container.Streams) (container.Process, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.startErr != nil {
		return nil, f.startErr
	}
	f.specs = append(f.specs, spec)
	stdin := &bufPipe{}
	stdin.cond = sync.NewCond(&stdin.mu)
	p := &fakeProc{
		id: fmt.Sprintf("fake%d", len(f.specs)), stdin: stdin, in: bufio.NewReader(stdin),
		stdout: s.Stdout, stderr: s.Stderr,
		exit: make(chan int, 1), killed: make(chan struct{}), done: make(chan struct{}), removedC: make(chan struct{}),
	}
	go func() {
		select {
		case p.code = <-p.exit:
		case <-p.killed:
			p.code = 137
		}
		close(p.done)
	}()
	f.procs <- p
	return p, nil
}

func (f *fakeRuntime) started() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.specs)
}

func (f *fakeRuntime) lastSpec() container.Spec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.specs[len(f.specs)-1]
}

// proc returns the next started process.
func (f *fakeRuntime) proc(t *testing.T) *fakeProc {
	t.Helper()
	select {
	case p := <-f.procs:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no container was started")
		return nil
	}
}

func (f *fakeRuntime) ImageExists(context.Context, string) (bool, error) { return true, nil }
func (f *fakeRuntime) ImportImage(context.Context, string, io.Reader, []string) error {
	return nil
}
func (f *fakeRuntime) ListManaged(context.Context) ([]container.Managed, error) { return nil, nil }
func (f *fakeRuntime) RemoveContainer(context.Context, string) error            { return nil }
func (f *fakeRuntime) Info(context.Context) (container.Info, error) {
	return container.Info{Name: "fake"}, nil
}
func (f *fakeRuntime) Close() error { return nil }

type fakeProc struct {
	id             string
	stdin          *bufPipe
	in             *bufio.Reader
	stdout, stderr io.Writer

	exit     chan int
	code     int
	done     chan struct{}
	killed   chan struct{}
	killOnce sync.Once

	removeOnce sync.Once
	removedC   chan struct{}
}

func (p *fakeProc) ID() string            { return p.id }
func (p *fakeProc) Stdin() io.WriteCloser { return p.stdin }
func (p *fakeProc) Wait(ctx context.Context) (container.Exit, error) {
	select {
	case <-p.done:
		return container.Exit{Code: p.code}, nil
	case <-ctx.Done():
		return container.Exit{}, ctx.Err()
	}
}
func (p *fakeProc) Kill(context.Context) error {
	p.killOnce.Do(func() {
		close(p.killed)
		p.stdin.Close()
	})
	return nil
}
func (p *fakeProc) Remove(ctx context.Context) error {
	_ = p.Kill(ctx)
	p.removeOnce.Do(func() { close(p.removedC) })
	return nil
}

func (p *fakeProc) removed() bool {
	select {
	case <-p.removedC:
		return true
	default:
		return false
	}
}

func (p *fakeProc) wasKilled() bool {
	select {
	case <-p.killed:
		return true
	default:
		return false
	}
}

// recv reads one line pml wrote to the runner.
func (p *fakeProc) recv(t *testing.T) map[string]any {
	t.Helper()
	type got struct {
		line []byte
		err  error
	}
	c := make(chan got, 1)
	go func() {
		l, err := p.in.ReadBytes('\n')
		c <- got{l, err}
	}()
	select {
	case g := <-c:
		if g.err != nil {
			t.Fatalf("reading what pml sent: %v", g.err)
		}
		var m map[string]any
		if err := json.Unmarshal(g.line, &m); err != nil {
			t.Fatalf("pml sent a line that is not JSON: %q", g.line)
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("pml sent nothing")
		return nil
	}
}

// send writes lines to pml as the runner's stdout.
func (p *fakeProc) send(lines ...string) {
	for _, l := range lines {
		_, _ = p.stdout.Write([]byte(l + "\n"))
	}
}

// bufPipe is the container's stdin: buffered like a socket, so writing
// does not wait for the test to read; Close ends both sides.
type bufPipe struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    bytes.Buffer
	closed bool
}

func (b *bufPipe) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, io.ErrClosedPipe
	}
	b.buf.Write(p)
	b.cond.Broadcast()
	return len(p), nil
}

func (b *bufPipe) Read(p []byte) (int, error) {
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

func (b *bufPipe) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.cond.Broadcast()
	return nil
}
