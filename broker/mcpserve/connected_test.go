package mcpserve

import (
	"context"
	"testing"
	"time"
)

// A frame read right after initialize's answer can come before Connect
// has handed pml the session: the batch rule then waits for it instead
// of taking the session for one not yet initialized (make test saw
// "accepted only after initialize" for a batch sent after initialize).
func TestTheBatchRuleWaitsForTheConnectedSession(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fastFront{connected: make(chan struct{}), ctx: ctx}
	got := make(chan struct{})
	go func() {
		f.connectedSession()
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("connectedSession returned before the session was set")
	case <-time.After(30 * time.Millisecond):
	}
	f.session(nil)
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("connectedSession still waits after the session was set")
	}

	// A session that ends before Connect returned does not hold the rule.
	ctx2, cancel2 := context.WithCancel(context.Background())
	g := &fastFront{connected: make(chan struct{}), ctx: ctx2}
	cancel2()
	if ss := g.connectedSession(); ss != nil {
		t.Fatalf("a session after its end: %v", ss)
	}
}
