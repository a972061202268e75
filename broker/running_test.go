package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/container"
)

// waitsForCancel is a runtime whose starts wait for their context to
// end: a call that starts a container runs until it is cancelled.
type waitsForCancel struct {
	*inProcess
	once    sync.Once
	started chan struct{}
}

func (r *waitsForCancel) Start(ctx context.Context, spec container.Spec, s container.Streams) (container.Process, error) {
	r.once.Do(func() { close(r.started) })
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestEndingTheBaseCancelsRunningAndLaterCalls: the broker's base context
// (Close, the session's end) cancels a call running, and a call that
// starts after it is cancelled at once (runningCalls).
func TestEndingTheBaseCancelsRunningAndLaterCalls(t *testing.T) {
	rt := &waitsForCancel{inProcess: &inProcess{}, started: make(chan struct{})}
	b := openBroker(t, rt, `{"permissions": {"allow": ["filesystem:read_file"]}}`, nil)
	done := make(chan call.Result, 1)
	go func() { done <- callOnce(b, "filesystem:read_file", map[string]any{"path": "a.txt"}) }()
	select {
	case <-rt.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the call never started a container")
	}
	b.Serving().CancelBase()
	select {
	case res := <-done:
		if !res.IsError {
			t.Errorf("the cancelled call succeeded: %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ending the base did not cancel the running call")
	}
	later := make(chan call.Result, 1)
	go func() { later <- callOnce(b, "filesystem:read_file", map[string]any{"path": "a.txt"}) }()
	select {
	case res := <-later:
		if !res.IsError {
			t.Errorf("a call after the base ended succeeded: %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call after the base ended was not cancelled")
	}
}

// TestRunningCallsCancelEveryCallOnce: cancelAll cancels what runs, not
// what returned, and whatever is added after it.
func TestRunningCallsCancelEveryCallOnce(t *testing.T) {
	var r runningCalls
	n := map[string]int{}
	add := func(name string) *call.Call {
		c := &call.Call{Tool: name}
		r.add(c, func() { n[name]++ })
		return c
	}
	add("running")
	r.remove(add("returned"))
	r.cancelAll()
	add("after")
	if n["running"] != 1 || n["returned"] != 0 || n["after"] != 1 {
		t.Errorf("cancels %v, want running and after once each, returned never", n)
	}
}
