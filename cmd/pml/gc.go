package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// The collector's target for a process that runs a broker. Its live heap
// is a few MiB, while the go-sdk's JSON decoding allocates a fresh 32 KiB
// buffer for every message it reads: at Go's default (collect when the
// heap has doubled, at 4 MiB at the least) the collector ran every few
// calls and took half of the broker's CPU per forwarded call, and once
// during start-up, before initialize was answered. With 200 a forwarded
// call costs about 40 % less CPU and start-up sees no collection, for a
// few MiB more heap under load. A large live heap (a flood of tool
// output) gets Go's default back, so its peak stays what it was.
//
// The collector's headroom is the percentage of the live heap and the
// goroutines' stacks together: 256 calls in flight hold 8 to 16 MiB of
// stacks, and at 200 % the heap grew by twice that before the next
// collection (a broker serving one server held 65 MiB after a burst of
// 256 callers). The headroom is kept under maxHeadroom while that takes
// no less than the default.
const (
	smallHeapGCPercent = 200
	defaultGCPercent   = 100
	// smallHeap is where the default takes over again.
	smallHeap = 32 << 20
	// maxHeadroom bounds what 200 % may add; a broker's warm calls
	// (a few MiB of heap, stacks of a few workers) are well under it.
	maxHeadroom = 16 << 20
)

// gcPercentFor is the collector's target after a collection that left
// live bytes of heap, with roots bytes of stacks and globals to scan.
func gcPercentFor(live, roots uint64) int {
	if live >= smallHeap {
		return defaultGCPercent
	}
	base := live + roots
	if base*smallHeapGCPercent/100 <= maxHeadroom {
		return smallHeapGCPercent
	}
	return max(defaultGCPercent, int(maxHeadroom*100/base))
}

// tuneGC sets the target now and after every collection, unless GOGC in
// the environment says otherwise.
func tuneGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(smallHeapGCPercent)
	current := smallHeapGCPercent
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	afterEachGC(func() {
		metrics.Read(sample)
		var v [3]uint64
		for i, s := range sample {
			if s.Value.Kind() != metrics.KindUint64 {
				return
			}
			v[i] = s.Value.Uint64()
		}
		if want := gcPercentFor(v[0], v[1]+v[2]); want != current {
			debug.SetGCPercent(want)
			current = want
		}
	})
}

// afterEachGC runs f (on the finalizer goroutine) after every garbage
// collection, for the life of the process: an unreachable sentinel is
// finalized after the collection that finds it, and f arms the next one.
func afterEachGC(f func()) {
	s := &gcSentinel{}
	runtime.SetFinalizer(s, func(*gcSentinel) {
		f()
		afterEachGC(f)
	})
}

// gcSentinel holds a pointer so that it is never batched with other tiny
// objects, whose finalizers need not run.
type gcSentinel struct{ _ *int }
