package main

import (
	"runtime"
	"testing"
	"time"
)

func TestTheCollectorTargetFollowsTheLiveHeap(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, smallHeapGCPercent},
		{3 << 20, smallHeapGCPercent},
		{smallHeap - 1, smallHeapGCPercent},
		{smallHeap, defaultGCPercent},
		{500 << 20, defaultGCPercent},
	} {
		if got := gcPercentFor(c.live); got != c.want {
			t.Errorf("live %d: got %d, want %d", c.live, got, c.want)
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
