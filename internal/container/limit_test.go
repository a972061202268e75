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
	pool := NewPool(PoolOptions{Runtime: l, Min: 2, Max: 2})
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
