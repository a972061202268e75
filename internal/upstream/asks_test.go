package upstream

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestTheBucketLetsABurstThroughThenRefills(t *testing.T) {
	var b bucket
	now := time.Unix(1000, 0)
	for i := 0; i < AskBurst; i++ {
		if !b.take(now) {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	if b.take(now) {
		t.Fatal("a request beyond the burst passed")
	}
	if !b.take(now.Add(AskEvery)) {
		t.Fatal("no refill after AskEvery")
	}
	if b.take(now.Add(AskEvery)) {
		t.Fatal("refilled more than one")
	}
}

type keyedRelay struct {
	key   any
	asked []string
}

func (k *keyedRelay) SessionKey() any                                           { return k.key }
func (k *keyedRelay) Progress(context.Context, *mcp.ProgressNotificationParams) {}
func (k *keyedRelay) Log(context.Context, *mcp.LoggingMessageParams)            {}
func (k *keyedRelay) Elicit(_ context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	k.asked = append(k.asked, p.Message)
	return &mcp.ElicitResult{Action: "accept"}, nil
}
func (k *keyedRelay) CreateMessage(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{}, nil
}

func TestServerRequestsGoOnlyToTheOneSessionInFlight(t *testing.T) {
	s := New(Options{Name: "srv"})
	ctx := context.Background()
	q := &mcp.ElicitParams{Message: "hi"}
	if _, err := s.routedElicit(ctx, q); !errors.Is(err, ErrAskRefused) {
		t.Fatalf("no call in flight: %v", err)
	}
	a1, a2 := &keyedRelay{key: "A"}, &keyedRelay{key: "A"}
	r1, r2 := s.pushRelay(a1), s.pushRelay(a2)
	if _, err := s.routedElicit(ctx, q); err != nil {
		t.Fatal(err)
	}
	if len(a2.asked) != 1 || a2.asked[0] != "server srv asks: hi" || len(a1.asked) != 0 {
		t.Fatalf("asked %v %v", a1.asked, a2.asked)
	}
	b := &keyedRelay{key: "B"}
	rb := s.pushRelay(b)
	if _, err := s.routedElicit(ctx, q); !errors.Is(err, ErrAskRefused) || len(b.asked)+len(a1.asked)+len(a2.asked) != 1 {
		t.Fatalf("two sessions in flight: %v", err)
	}
	s.popRelay(rb)
	s.popRelay(r1)
	s.popRelay(r2)
}
