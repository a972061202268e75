package main

import (
	"runtime"
	"testing"
	"time"
)

func TestTheCollectorTargetFollowsTheLiveHeap(t *testing.T) {
	for _, c := range []struct {
		live, roots uint64
		want        int
	}{
		{0, 0, smallHeapGCPercent},
		{3 << 20, 1 << 20, smallHeapGCPercent},
		{6 << 20, 2 << 20, smallHeapGCPercent},
		// A burst of calls in flight: their stacks count.
		{4 << 20, 9 << 20, 123},
		{4 << 20, 16 << 20, defaultGCPercent},
		{smallHeap - 1, 0, defaultGCPercent},
		{smallHeap, 0, defaultGCPercent},
		{500 << 20, 0, defaultGCPercent},
	} {
		if got := gcPercentFor(c.live, c.roots); got != c.want {
			t.Errorf("live %d, roots %d: got %d, want %d", c.live, c.roots, got, c.want)
		}
	}
}

func TestAHookRunsAfterEveryCollection(t *testing.T) {
	ran := make(chan struct{}, 10)
	// The hook outlives the test (it is for the life of the process): it
	// must never block the finalizer goroutine once nobody reads.
	afterEachGC(func() {
		select {
		case ran <- struct{}{}:
		default:
		}
	})
	for i := 0; i < 3; i++ {
		runtime.GC()
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatalf("the hook did not run after collection %d", i+1)
		}
	}
}
