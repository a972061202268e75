package main

import (
	"sync/atomic"
	"testing"
	"time"
)

// A session's end waits for the work started beside it, and no longer
// than its bound.
func TestBackgroundWaitsBounded(t *testing.T) {
	var b background
	var done atomic.Bool
	b.run(func() { time.Sleep(20 * time.Millisecond); done.Store(true) })
	b.wait(5 * time.Second)
	if !done.Load() {
		t.Fatal("wait returned before the work ended")
	}
	block := make(chan struct{})
	defer close(block)
	b.run(func() { <-block })
	began := time.Now()
	b.wait(50 * time.Millisecond)
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("wait took %v past its bound", d)
	}
}
