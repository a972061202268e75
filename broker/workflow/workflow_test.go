package workflow

import (
	"errors"
	"testing"
	"time"
)

func TestWorkflowStoreIsBounded(t *testing.T) {
	w := NewWorkflows(time.Minute)
	first := w.Create(ApprovalToolPermission, "t", nil, "*")
	for i := 0; i < MaxWorkflows; i++ {
		w.Create(ApprovalToolPermission, "t", nil, "*")
	}
	if _, err := w.Take(first.ID, "t"); !errors.Is(err, ErrWorkflowUnknown) {
		t.Fatalf("oldest not evicted: %v", err)
	}
	if w.Len() != MaxWorkflows {
		t.Fatalf("%d workflows kept", w.Len())
	}
}

func TestAWorkflowIsTakenOnceUnlessReleased(t *testing.T) {
	w := NewWorkflows(time.Minute)
	wf := w.Create(ApprovalToolPermission, "a:x", nil, "a:*")
	if _, err := w.Take(wf.ID, "b:y"); err == nil {
		t.Fatal("another tool took the workflow")
	}
	if _, err := w.Take(wf.ID, "a:x"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Take(wf.ID, "a:x"); !errors.Is(err, ErrWorkflowUsed) {
		t.Fatalf("taken twice: %v", err)
	}
	w.Release(wf)
	if !w.Pending(wf) {
		t.Fatal("a released workflow is not pending")
	}
	if _, err := w.Take(wf.ID, ""); err != nil {
		t.Fatalf("a released workflow cannot be taken again: %v", err)
	}
	w.Finish(wf)
	if w.Pending(wf) {
		t.Fatal("a finished workflow is pending")
	}
}

func TestAWorkflowExpires(t *testing.T) {
	w := NewWorkflows(time.Minute)
	wf := w.Create(ApprovalToolPermission, "a:x", nil, "")
	w.SetClock(func() time.Time { return time.Now().Add(2 * time.Minute) })
	if _, err := w.Take(wf.ID, "a:x"); !errors.Is(err, ErrWorkflowExpired) {
		t.Fatalf("got %v", err)
	}
}

func TestARelayedAnswerIsRefusedForTheDialog(t *testing.T) {
	w := NewWorkflows(time.Minute)
	wf := w.Create(ApprovalToolPermission, "a:x", nil, "")
	w.ToDialog(wf, true)
	if _, err := w.TakeRelayed(wf.ID, "a:x"); !errors.Is(err, ErrAnsweredInDialog) {
		t.Fatalf("got %v", err)
	}
	w.Settled(wf, "declined", true)
	_, err := w.TakeRelayed(wf.ID, "a:x")
	if !errors.Is(err, ErrAnsweredInDialog) || err.Error() != "this approval was put to the client's dialog and ended there: declined; the call is not run" {
		t.Fatalf("got %v", err)
	}
}

func TestAttachWrapsThePayloadForTheOuterRun(t *testing.T) {
	w := NewWorkflows(time.Minute)
	wf := w.Create(ApprovalIntegrity, "a:x", nil, "")
	wf.Data = "inner"
	var got any
	if w.Attach(wf.ID, "pml:execute", func(inner any) any { got = inner; return "outer" }) == nil {
		t.Fatal("a pending workflow was not attached")
	}
	if got != "inner" || wf.Data != "outer" || wf.Outer != "pml:execute" {
		t.Fatalf("inner %v, data %v, outer %q", got, wf.Data, wf.Outer)
	}
	if _, err := w.Take(wf.ID, "pml:execute"); err != nil {
		t.Fatalf("the outer run's tool cannot answer: %v", err)
	}
	if w.Attach(wf.ID, "pml:execute", func(any) any { return nil }) != nil {
		t.Fatal("a taken workflow was attached")
	}
}
