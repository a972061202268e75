package broker

import (
	"context"
	"sync"

	"github.com/pml-dev/pml/broker/call"
)

// runningCalls are the calls in Broker.Call, each with the cancel of its
// context: the broker's base context, once cancelled (Close), cancels
// them all (cancelAll runs then), and a call that starts after it is
// cancelled at once. Safe for concurrent use; the zero value is ready.
type runningCalls struct {
	mu    sync.Mutex
	ended bool
	calls map[*call.Call]context.CancelFunc
}

// add makes c's cancel one that cancelAll calls (at once when it ran
// already).
func (r *runningCalls) add(c *call.Call, cancel context.CancelFunc) {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		cancel()
		return
	}
	if r.calls == nil {
		r.calls = map[*call.Call]context.CancelFunc{}
	}
	r.calls[c] = cancel
	r.mu.Unlock()
}

// remove forgets c (it returned).
func (r *runningCalls) remove(c *call.Call) {
	r.mu.Lock()
	delete(r.calls, c)
	r.mu.Unlock()
}

// cancelAll cancels every call running and every one added after.
func (r *runningCalls) cancelAll() {
	r.mu.Lock()
	r.ended = true
	calls := r.calls
	r.calls = nil
	r.mu.Unlock()
	for _, cancel := range calls {
		cancel()
	}
}
