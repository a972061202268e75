package container_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
)

// blockUntilKilled behaves like a long `sleep`.
func blockUntilKilled(stdin io.Reader, stdout, stderr io.Writer, killed <-chan struct{}) int {
	<-killed
	return 137
}

func TestLimitedQueuesBeyondTheCap(t *testing.T) {
	f := &containertest.Runtime{Behave: behave(func(stdin io.Reader, stdout, stderr io.Writer, killed <-chan struct{}) int {
		_, _ = io.Copy(io.Discard, stdin)
		return 0
	})}
	l := Limit(f, 3)
	var running, peak atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			p, err := l.Start(ctx, Spec{Image: "x"}, Streams{})
			if err != nil {
				t.Error(err)
				return
			}
			n := running.Add(1)
			for {
				old := peak.Load()
				if n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
			running.Add(-1)
			_ = p.Stdin().Close()
			if _, err := p.Wait(ctx); err != nil {
				t.Error(err)
			}
			_ = p.Remove(ctx)
		}()
	}
	wg.Wait()
	if peak.Load() > 3 {
		t.Fatalf("%d containers ran at once, cap 3", peak.Load())
	}
	if l.Running() != 0 {
		t.Fatalf("%d slots still taken after every container was removed", l.Running())
	}
}

func TestLimitedWaitCountsInTheCallsTimeout(t *testing.T) {
	f := &containertest.Runtime{Behave: behave(blockUntilKilled)}
	l := Limit(f, 1)
	p, err := l.Start(context.Background(), Spec{}, Streams{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = l.Start(ctx, Spec{}, Streams{})
	if !errors.Is(err, ErrAtCap) || !strings.Contains(err.Error(), "sandbox.max_containers") {
		t.Fatalf("a start past the cap and its deadline: %v, want ErrAtCap naming sandbox.max_containers", err)
	}
	if _, err := l.Start(WithoutQueue(context.Background()), Spec{}, Streams{}); !errors.Is(err, ErrAtCap) {
		t.Fatalf("a start without queue at the cap: %v, want ErrAtCap at once", err)
	}
	_ = p.Kill(context.Background())
	_ = p.Remove(context.Background())
	p2, err := l.Start(context.Background(), Spec{}, Streams{})
	if err != nil {
		t.Fatalf("after the removal a slot is free: %v", err)
	}
	_ = p2.Remove(context.Background())
	_ = p2.Remove(context.Background()) // twice gives back one slot
	if l.Running() != 0 {
		t.Fatalf("running %d", l.Running())
	}
}

func TestPoolPreStartsGiveWayToCalls(t *testing.T) {
	f := &containertest.Runtime{Behave: behave(blockUntilKilled)}
	l := Limit(f, 2)
	pool := NewPrestarted(PrestartedOptions{Runtime: l, Min: 2, Max: 2})
	l.SetReclaim(pool.Reclaim)
	defer pool.Close(context.Background())
	// Kind A: one call, then its pool fills (2 pre-started, holding both slots).
	lease, err := pool.Acquire(context.Background(), Spec{Image: "a"}, Streams{})
	if err != nil {
		t.Fatal(err)
	}
	lease.Release()
	deadline := time.Now().Add(5 * time.Second)
	for pool.Stats(Spec{Image: "a"}).Ready+pool.Stats(Spec{Image: "a"}).Starting < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// Kind B needs a slot: a pre-started A gives its up.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lb, err := pool.Acquire(ctx, Spec{Image: "b"}, Streams{})
	if err != nil {
		t.Fatalf("a call behind idle pre-started containers: %v", err)
	}
	lb.Release()
}

// gatedStarts lets the first start through and holds every later one
// until open is closed, the way a slow engine holds a pre-start.
type gatedStarts struct {
	Runtime
	n    atomic.Int32
	open chan struct{}
}

func (g *gatedStarts) Start(ctx context.Context, spec Spec, s Streams) (Process, error) {
	if g.n.Add(1) > 1 {
		<-g.open
	}
	return g.Runtime.Start(ctx, spec, s)
}

// TestACallQueuedBehindAPreStartGetsItsSlot: a call that found no
// container ready queued for a slot while a pre-start of its own kind
// held it; the pre-start then finished and waited, idle, with the slot.
// The call must get a container then, not wait out its whole timeout
// (seen on Podman: every call of a burst timed out after 4 minutes behind
// idle pre-started containers).
func TestACallQueuedBehindAPreStartGetsItsSlot(t *testing.T) {
	g := &gatedStarts{Runtime: &containertest.Runtime{Behave: behave(blockUntilKilled)}, open: make(chan struct{})}
	l := Limit(g, 1)
	pool := NewPrestarted(PrestartedOptions{Runtime: l, Min: 1, Max: 1, Ready: l.Idle})
	l.SetReclaim(pool.Reclaim)
	var opened sync.Once
	openGate := func() { opened.Do(func() { close(g.open) }) }
	defer pool.Close(context.Background())
	defer openGate() // before Close: it waits for the held pre-start
	spec := Spec{Image: "a"}
	ctx := context.Background()

	// The first call, cold; its container is gone before it releases, so
	// the pre-start its release asks for takes the one slot.
	first, err := pool.Acquire(ctx, spec, Streams{})
	if err != nil {
		t.Fatal(err)
	}
	_ = first.Kill(ctx)
	_ = first.Remove(ctx)
	first.Release()
	eventually(t, "the pre-start took the slot", func() bool { return l.Running() == 1 })

	// The second call finds nothing ready and queues for the slot.
	got := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		lease, err := pool.Acquire(cctx, spec, Streams{})
		if err == nil {
			lease.Release()
		}
		got <- err
	}()
	eventually(t, "the call queued", func() bool { return l.Waiting() == 1 })

	// The pre-start finishes and waits, idle, holding the slot.
	openGate()
	if err := <-got; err != nil {
		t.Fatalf("the queued call: %v", err)
	}
}

// TestUsedIsSetByTheFirstStartEvenAFailedOne: a pml whose Limited was
// never asked to start anything has no container to sweep; a failed start
// may still have reached the engine, so it counts.
func TestUsedIsSetByTheFirstStartEvenAFailedOne(t *testing.T) {
	f := &containertest.Runtime{StartErr: errors.New("engine down")}
	l := Limit(f, 2)
	if l.Used() {
		t.Fatal("used before any start")
	}
	if _, err := l.Start(context.Background(), Spec{Image: "x"}, Streams{}); err == nil {
		t.Fatal("the start did not fail")
	}
	if !l.Used() {
		t.Error("a failed start does not count")
	}
}

// A start waiting at the cap tries the reclaimers AddReclaim registered
// (an idle pooled server's, broker/tools), now and again each time Idle
// says a container became idle: the first that frees a slot gives it.
func TestAStartAtTheCapTakesTheSlotAReclaimerFrees(t *testing.T) {
	f := &containertest.Runtime{Behave: behave(blockUntilKilled)}
	l := Limit(f, 1)
	held, err := l.Start(context.Background(), Spec{}, Streams{})
	if err != nil {
		t.Fatal(err)
	}
	var idle atomic.Bool // the held container has no call in flight
	var tried atomic.Int32
	l.AddReclaim(func() bool {
		tried.Add(1)
		if !idle.Load() {
			return false
		}
		go func() { _ = held.Remove(context.Background()) }()
		return true
	})
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p, err := l.Start(ctx, Spec{}, Streams{})
		if err == nil {
			_ = p.Remove(context.Background())
		}
		got <- err
	}()
	for tried.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-got:
		t.Fatalf("the start did not wait while nothing was idle: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	idle.Store(true)
	l.Idle()
	if err := <-got; err != nil {
		t.Fatalf("the start once a reclaimer freed a slot: %v", err)
	}
}

// leaving is a runtime whose processes leave standbys (as internal/docker's).
type leaving struct {
	Runtime
	left atomic.Int32
}

type leavingProcess struct {
	Process
	r *leaving
}

func (p leavingProcess) LeaveStandby(release func()) { p.r.left.Add(1) }

func (p leavingProcess) StandbyPlanned() bool { return true }

func (r *leaving) Start(ctx context.Context, spec Spec, s Streams) (Process, error) {
	p, err := r.Runtime.Start(ctx, spec, s)
	if err != nil {
		return nil, err
	}
	return leavingProcess{p, r}, nil
}

func TestAStandbyHoldsASlotUntilACallNeedsIt(t *testing.T) {
	r := &leaving{Runtime: &containertest.Runtime{Behave: behave(blockUntilKilled)}}
	l := Limit(r, 2)
	ctx := context.Background()
	p, err := l.Start(ctx, Spec{Image: "x"}, Streams{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Remove(ctx)
	LeaveStandby(p)
	if r.left.Load() != 1 || l.Running() != 2 {
		t.Fatalf("standbys left %d, slots taken %d; want 1 and 2", r.left.Load(), l.Running())
	}
	// Every slot taken: no second standby.
	LeaveStandby(p)
	if r.left.Load() != 1 {
		t.Fatalf("a standby was left with every slot taken")
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	q, err := l.Start(wctx, Spec{Image: "x"}, Streams{})
	if err != nil {
		t.Fatalf("a call waited behind a standby's slot: %v", err)
	}
	defer q.Remove(ctx)
	if l.Running() != 2 {
		t.Fatalf("slots taken %d, want 2", l.Running())
	}
}
