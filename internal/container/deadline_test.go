package container_test

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
)

// hungRuntime is a runtime whose engine stops answering once it has
// started a container: a kill or a removal then waits until its context
// ends, as a request to a frozen dockerd does.
type hungRuntime struct {
	*containertest.Runtime
	hung atomic.Bool
	// thawed, once closed, lets the requests waiting go on.
	thawed chan struct{}
}

func newHung() *hungRuntime {
	return &hungRuntime{Runtime: sleeper(), thawed: make(chan struct{})}
}

// wait is a request to the hung engine: it ends with ctx, or goes on once
// the engine answers again.
func (r *hungRuntime) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-r.thawed:
		return nil
	}
}

func (r *hungRuntime) Start(ctx context.Context, spec Spec, s Streams) (Process, error) {
	p, err := r.Runtime.Start(ctx, spec, s)
	if err != nil {
		return nil, err
	}
	// The engine hangs once the container runs: every later request to
	// it waits.
	r.hung.Store(true)
	return &hungProc{Process: p, r: r}, nil
}

type hungProc struct {
	Process
	r *hungRuntime
}

func (p *hungProc) Kill(ctx context.Context) error {
	if p.r.hung.Load() {
		if err := p.r.wait(ctx); err != nil {
			return err
		}
	}
	return p.Process.Kill(ctx)
}

func (p *hungProc) Remove(ctx context.Context) error {
	if p.r.hung.Load() {
		if err := p.r.wait(ctx); err != nil {
			return err
		}
	}
	return p.Process.Remove(ctx)
}

func sleeper() *containertest.Runtime {
	return &containertest.Runtime{Behave: behave(func(_ io.Reader, _, _ io.Writer, killed <-chan struct{}) int {
		<-killed
		return 137
	})}
}

// A call's deadline is a bound whatever the engine does: with an engine
// that stops answering during the call, Run and Pool.Run return within
// DeadlineGrace of the deadline (they waited CleanupTimeout, 30 s, for the
// kill and as long again for the removal), and say that the removal was
// not confirmed.
func TestADeadlineIsABoundWhenTheEngineHangs(t *testing.T) {
	const timeout = 100 * time.Millisecond
	// Far below CleanupTimeout; room for a loaded machine running -race.
	bound := timeout + DeadlineGrace + 1500*time.Millisecond
	check := func(t *testing.T, res Result, took time.Duration) {
		t.Helper()
		if took > bound {
			t.Errorf("the call took %v with the engine hung, more than %v", took, bound)
		}
		d := res.Disposal
		if !res.TimedOut || d == nil || !d.Created || d.Removed || d.Container == "" {
			t.Fatalf("res %+v disposal %+v", res, d)
		}
		if s := d.String(); !strings.Contains(s, "may still be running") || !strings.Contains(s, "the next pml start removes it") {
			t.Errorf("the disposal says %q", s)
		}
	}
	t.Run("Run", func(t *testing.T) {
		rt := newHung()
		defer close(rt.thawed)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		began := time.Now()
		res, _ := Run(ctx, rt, Spec{}, nil, 1<<20)
		check(t, res, time.Since(began))
	})
	t.Run("Pool.Run", func(t *testing.T) {
		rt := newHung()
		p := NewPool(PoolOptions{Runtime: rt})
		defer func() {
			// The removal goes on in the background until its own
			// bound: the engine answers again, and it ends.
			close(rt.thawed)
			closePool(t, p)
			if procs := rt.Procs(); len(procs) == 0 || !procs[0].WasRemoved() {
				t.Error("the container was not removed once the engine answered again")
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		began := time.Now()
		res, _ := p.Run(ctx, toolboxSpec, Request{})
		check(t, res, time.Since(began))
	})
}

// With an engine that answers, a stopped call hears that its container
// was killed (137) and removed.
func TestAStoppedCallSaysItsContainerWasRemoved(t *testing.T) {
	rt := sleeper()
	p := NewPool(PoolOptions{Runtime: rt})
	defer closePool(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, _ := p.Run(ctx, toolboxSpec, Request{})
	if d := res.Disposal; !res.TimedOut || d == nil || !d.Removed || res.Exit.Code != 137 || !rt.IsRemoved(d.Container) {
		t.Fatalf("res %+v disposal %+v", res, d)
	}
	if s := res.Disposal.String(); s != "the container was killed and removed" {
		t.Errorf("the disposal says %q", s)
	}
}

func TestADisposalSaysWhatTheEngineConfirmed(t *testing.T) {
	for _, c := range []struct {
		d    Disposal
		want string
	}{
		{Disposal{}, "no container had been created yet"},
		{Disposal{Container: "pml-0123456789ab"}, "no container had been created yet (the engine had not answered pml's request to create pml-0123456789ab; should it still create it, the next pml start removes it, or run pml cleanup)"},
		{Disposal{Container: "0123456789abcdef", Created: true, Removed: true}, "the container was killed and removed"},
		{Disposal{Container: "0123456789abcdef", Created: true, Waited: 512 * time.Millisecond}, "the engine did not answer within 500ms: container 0123456789ab may still be running; the next pml start removes it (or run pml cleanup)"},
	} {
		if got := c.d.String(); got != c.want {
			t.Errorf("%+v says %q, want %q", c.d, got, c.want)
		}
	}
}

// requestLog records the requests a runtime's containers were sent.
type requestLog struct {
	*containertest.Runtime
	mu   sync.Mutex
	sent []string
}

func (r *requestLog) Start(ctx context.Context, spec Spec, s Streams) (Process, error) {
	p, err := r.Runtime.Start(ctx, spec, s)
	if err != nil {
		return nil, err
	}
	return &loggedProc{Process: p, r: r}, nil
}

func (r *requestLog) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sent)
}

type loggedProc struct {
	Process
	r *requestLog
}

func (p *loggedProc) log(what string) {
	p.r.mu.Lock()
	p.r.sent = append(p.r.sent, what)
	p.r.mu.Unlock()
}

func (p *loggedProc) Kill(ctx context.Context) error {
	p.log("kill")
	return p.Process.Kill(ctx)
}

func (p *loggedProc) Remove(ctx context.Context) error {
	p.log("remove")
	return p.Process.Remove(ctx)
}

// A stopped call's first request to the engine is the removal: a client
// may SIGKILL pml milliseconds after SIGTERM (codex), and the engine
// finishes a removal it was asked for, not a kill-then-remove whose
// second half never came (the container stayed, exited 137).
func TestAStoppedCallAsksForTheRemovalFirst(t *testing.T) {
	check := func(t *testing.T, rt *requestLog, res Result) {
		t.Helper()
		if !res.TimedOut || res.Disposal == nil || !res.Disposal.Removed {
			t.Fatalf("res %+v disposal %+v", res, res.Disposal)
		}
		if got := rt.requests(); len(got) == 0 || got[0] != "remove" {
			t.Errorf("the engine was sent %v; the removal must come first", got)
		}
	}
	t.Run("Run", func(t *testing.T) {
		rt := &requestLog{Runtime: sleeper()}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		res, _ := Run(ctx, rt, Spec{}, nil, 1<<20)
		check(t, rt, res)
	})
	t.Run("Pool.Run", func(t *testing.T) {
		rt := &requestLog{Runtime: sleeper()}
		p := NewPool(PoolOptions{Runtime: rt})
		defer closePool(t, p)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		res, _ := p.Run(ctx, toolboxSpec, Request{})
		check(t, rt, res)
	})
}
