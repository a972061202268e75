package execute

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBudgetPausesWhileWaitingForAPerson: the compute budget does not run
// while the run is paused on an approval, and ends the run once it runs
// out after the resume, long before the wall-clock timeout.
func TestBudgetPausesWhileWaitingForAPerson(t *testing.T) {
	f := newFakeRuntime()
	r := testRunner(f)
	r.Timeout = time.Hour
	r.Budget = 100 * time.Millisecond
	run, _ := start(t, r, f, "await mcp.a.b({})")
	run.Pause()
	run.Pause() // nested: two calls wait for a person
	time.Sleep(4 * r.Budget)
	run.Resume()
	time.Sleep(2 * r.Budget) // still one pause open
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	_, err := run.Next(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a paused run ended: %v (time waiting for a person was counted)", err)
	}
	run.Resume()
	_, err = nextEvent(t, run)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("after the resume the budget must end the run: %v, want ErrTimeout", err)
	}
}

// TestBudgetEndsASpinningRun: with no pause the budget ends the run.
func TestBudgetEndsASpinningRun(t *testing.T) {
	f := newFakeRuntime()
	r := testRunner(f)
	r.Timeout = time.Hour
	r.Budget = 50 * time.Millisecond
	run, p := start(t, r, f, "while(true){}")
	if _, err := nextEvent(t, run); !errors.Is(err, ErrTimeout) {
		t.Fatalf("a spinning run: %v, want ErrTimeout", err)
	}
	waitRemoved(t, p)
}
