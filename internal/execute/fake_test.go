package execute

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
)

// fakeRuntime is the shared fake runtime (containertest) whose containers
// are driven by the test: each started process is handed over on procs,
// and the test plays the runner through its stdin and stdout.
type fakeRuntime struct {
	*containertest.Runtime
	startErr error
	procs    chan *fakeProc
	exits    sync.Map // *containertest.Proc → chan int
}

func newFakeRuntime() *fakeRuntime {
	f := &fakeRuntime{procs: make(chan *fakeProc, 16)}
	f.Runtime = &containertest.Runtime{Behave: f.behave}
	return f
}

// Start fails with startErr when set, else starts a process the test
// drives and hands it over on procs.
func (f *fakeRuntime) Start(ctx context.Context, spec container.Spec, s container.Streams) (container.Process, error) {
	if f.startErr != nil {
		return nil, f.startErr
	}
	proc, err := f.Runtime.Start(ctx, spec, s)
	if err != nil {
		return nil, err
	}
	p := proc.(*containertest.Proc)
	f.procs <- &fakeProc{Proc: p, in: bufio.NewReader(p.In), stdout: p.Out, stderr: p.Err, exit: f.exitOf(p), removedC: p.RemovedC()}
	return p, nil
}

// behave: the process exits with the code the test sends on exit, or 137
// when it is killed.
func (f *fakeRuntime) behave(p *containertest.Proc) int {
	select {
	case code := <-f.exitOf(p):
		return code
	case <-p.Killed():
		return 137
	}
}

func (f *fakeRuntime) exitOf(p *containertest.Proc) chan int {
	c, _ := f.exits.LoadOrStore(p, make(chan int, 1))
	return c.(chan int)
}

func (f *fakeRuntime) started() int { return len(f.Procs()) }

func (f *fakeRuntime) lastSpec() container.Spec { return f.Last().Spec }

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

type fakeProc struct {
	*containertest.Proc
	in             *bufio.Reader
	stdout, stderr io.Writer
	// exit ends the process with the code sent.
	exit     chan int
	removedC <-chan struct{}
}

func (p *fakeProc) removed() bool { return p.WasRemoved() }

func (p *fakeProc) wasKilled() bool { return p.WasKilled() }

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
