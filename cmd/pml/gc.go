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
const (
	smallHeapGCPercent = 200
	defaultGCPercent   = 100
	// smallHeap is where the default takes over again.
	smallHeap = 32 << 20
)

// gcPercentFor is the collector's target after a collection that left
// live bytes of heap.
func gcPercentFor(live uint64) int {
	if live < smallHeap {
		return smallHeapGCPercent
	}
	return defaultGCPercent
}

// tuneGC sets the target now and after every collection, unless GOGC in
// the environment says otherwise.
func tuneGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(smallHeapGCPercent)
	current := smallHeapGCPercent
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	afterEachGC(func() {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		if want := gcPercentFor(sample[0].Value.Uint64()); want != current {
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
