package container

import (
	"context"
	"testing"
	"time"
)

func TestCloseWaitsForWhatStoppedCallsLeftRunning(t *testing.T) {
	if err := WaitLingering(context.Background()); err != nil {
		t.Fatalf("nothing lingering: %v", err)
	}
	done := Linger()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := WaitLingering(ctx); err == nil {
		t.Fatal("WaitLingering returned while a request lingered")
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		done()
		done() // a second call does nothing
	}()
	if err := WaitLingering(context.Background()); err != nil {
		t.Fatal(err)
	}
	again := Linger()
	again()
	if err := WaitLingering(context.Background()); err != nil {
		t.Fatal(err)
	}
}
