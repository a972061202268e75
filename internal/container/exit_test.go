package container_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/pml-dev/pml/internal/container"
)

func TestAnExitWatchKeepsTheFirstExit(t *testing.T) {
	w := NewExitWatch()
	if _, err := w.Exit(); !errors.Is(err, ErrRunning) {
		t.Fatalf("Exit before Finish = %v, want ErrRunning", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on an ended context = %v", err)
	}
	w.Finish(Exit{Code: 2, OOMKilled: true}, nil)
	w.Finish(Exit{Code: 9}, errors.New("later"))
	for i := 0; i < 2; i++ {
		e, err := w.Wait(context.Background())
		if err != nil || e.Code != 2 || !e.OOMKilled {
			t.Fatalf("Wait %d = %+v, %v; want the first exit", i, e, err)
		}
	}
	select {
	case <-w.Done():
	default:
		t.Fatal("Done not closed by Finish")
	}
}

func TestACleanupContextOutlivesItsCallButNotItsDeadline(t *testing.T) {
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	cancel()
	cctx, ccancel := CleanupContext(ctx)
	defer ccancel()
	if cctx.Err() != nil {
		t.Fatal("the cleanup context ended with the call")
	}
	if _, ok := cctx.Deadline(); !ok {
		t.Fatal("the cleanup context has no deadline")
	}
	if cctx.Value(key{}) != "v" {
		t.Fatal("the cleanup context lost the call's values")
	}
}
