package upstream

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"context"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestEachCallHasItsOwnBudgetOfQuestions(t *testing.T) {
	s := New(Options{Name: "srv"})
	ctx := context.Background()
	q := &mcp.ElicitParams{Message: "hi"}
	a := &keyedRelay{key: "A"}
	// Two calls one after the other, each asking one more than it may:
	// each call's first AskPerCall reach the person, however close
	// together the calls are, and the rest are refused.
	for call := 1; call <= 2; call++ {
		ref := s.pushRelay(a)
		for i := 1; i <= AskPerCall+1; i++ {
			_, err := s.routedElicit(ctx, q)
			if i <= AskPerCall && err != nil {
				t.Fatalf("call %d, question %d: %v", call, i, err)
			}
			if i > AskPerCall && !errors.Is(err, ErrAskRefused) {
				t.Fatalf("call %d, question %d beyond the budget: %v", call, i, err)
			}
		}
		s.popRelay(ref)
	}
	if len(a.asked) != 2*AskPerCall {
		t.Fatalf("%d questions reached the person, want %d", len(a.asked), 2*AskPerCall)
	}
	// Sampling spends the same budget.
	ref := s.pushRelay(a)
	defer s.popRelay(ref)
	for i := 0; i < AskPerCall; i++ {
		if _, err := s.routedSample(ctx, &mcp.CreateMessageParams{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.routedElicit(ctx, q); !errors.Is(err, ErrAskRefused) {
		t.Fatalf("an elicitation after %d samplings in one call: %v", AskPerCall, err)
	}
}

func TestAOneShotServersQuestionsHaveTheCallsBudget(t *testing.T) {
	s := New(Options{Name: "srv"})
	a := &keyedRelay{key: "A"}
	h := s.clientOptions(true, &relayRef{r: a}).ElicitationHandler
	for i := 1; i <= AskPerCall+1; i++ {
		_, err := h(context.Background(), &mcp.ElicitRequest{Params: &mcp.ElicitParams{Message: "hi"}})
		if (i <= AskPerCall) != (err == nil) {
			t.Fatalf("question %d: %v", i, err)
		}
	}
	if _, err := s.clientOptions(true, nil).ElicitationHandler(context.Background(), &mcp.ElicitRequest{Params: &mcp.ElicitParams{}}); !errors.Is(err, ErrAskRefused) {
		t.Fatalf("a one-shot server with no caller: %v", err)
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
