package mcpserve

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// A burst of calls leaves at most maxIdleWorkers waiting for the next,
// each with the stack its calls grew: not one per call of the burst.
func TestABurstLeavesBoundedIdleWorkers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fastFront{ctx: ctx, work: make(chan func())}
	before := runtime.NumGoroutine()
	const burst = 4 * maxIdleWorkers
	release := make(chan struct{})
	var started, done sync.WaitGroup
	started.Add(burst)
	done.Add(burst)
	for range burst {
		f.run(func() {
			started.Done()
			<-release
			done.Done()
		})
	}
	started.Wait()
	close(release)
	done.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine()-before > maxIdleWorkers && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine() - before; n > maxIdleWorkers {
		t.Fatalf("%d workers left after a burst of %d calls; at most %d should wait", n, burst, maxIdleWorkers)
	}
	// The ones left take the next calls.
	ran := make(chan struct{})
	f.run(func() { close(ran) })
	<-ran
	if n := f.idle.Load(); n > maxIdleWorkers {
		t.Errorf("%d idle workers counted", n)
	}
}
