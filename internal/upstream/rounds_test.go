package upstream

//lint:file-ignore SA1019 a 2026-07-28 server may still ask for roots and sampling in its input requests

import (
	"context"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// askingRelay is an InputAsker: it records what it was asked at once.
type askingRelay struct {
	keyedRelay
	rounds []mcp.InputRequestMap
}

func (a *askingRelay) AskInputs(_ context.Context, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	a.rounds = append(a.rounds, reqs)
	out := mcp.InputResponseMap{}
	for k := range reqs {
		out[k] = &mcp.ElicitResult{Action: "accept"}
	}
	out["not_asked"] = &mcp.ElicitResult{Action: "accept"}
	return out, nil
}

func TestAModernServersRoundsStayInTheCall(t *testing.T) {
	s := New(Options{Name: "srv"})
	ctx := context.Background()
	roots := []*mcp.Root{{URI: "file:///workspace"}}
	reqs := mcp.InputRequestMap{
		"name":  &mcp.ElicitParams{Message: "Who?"},
		"roots": &mcp.ListRootsParams{},
	}

	// A legacy caller gets the question as a request, attributed; the
	// roots are pml's, never the caller's.
	legacy := &keyedRelay{key: "A"}
	got, err := s.fulfil(ctx, &relayRef{r: legacy}, roots, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(legacy.asked) != 1 || legacy.asked[0] != "server srv asks: Who?" {
		t.Fatalf("asked %q", legacy.asked)
	}
	if r, ok := got["roots"].(*mcp.ListRootsResult); !ok || len(r.Roots) != 1 || r.Roots[0].URI != "file:///workspace" {
		t.Fatalf("roots answered %#v", got["roots"])
	}

	// A modern caller gets the questions at once under the server's keys;
	// only answers to what was asked go back.
	modern := &askingRelay{}
	got, err = s.fulfil(ctx, &relayRef{r: modern}, roots, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(modern.rounds) != 1 || len(modern.rounds[0]) != 1 || modern.rounds[0]["name"].(*mcp.ElicitParams).Message != "server srv asks: Who?" {
		t.Fatalf("asked %#v", modern.rounds)
	}
	if _, ok := got["not_asked"]; ok || len(got) != 2 {
		t.Fatalf("answers passed on: %#v", got)
	}

	// The call's budget counts every question of every round.
	ref := &relayRef{r: legacy}
	many := mcp.InputRequestMap{"a": &mcp.ElicitParams{}, "b": &mcp.ElicitParams{}, "c": &mcp.CreateMessageParams{}}
	if _, err := s.fulfil(ctx, ref, nil, many); err != nil {
		t.Fatal(err)
	}
	if _, err := s.fulfil(ctx, ref, nil, mcp.InputRequestMap{"d": &mcp.ElicitParams{}}); !errors.Is(err, ErrAskRefused) {
		t.Fatalf("a 4th question in one call: %v", err)
	}
	// No questions (load shedding) and a call with no caller are refused.
	if _, err := s.fulfil(ctx, &relayRef{r: legacy}, nil, mcp.InputRequestMap{}); !errors.Is(err, errBusy) {
		t.Fatalf("no questions: %v", err)
	}
	if _, err := s.fulfil(ctx, nil, nil, mcp.InputRequestMap{"x": &mcp.ElicitParams{}}); !errors.Is(err, ErrAskRefused) {
		t.Fatalf("no caller: %v", err)
	}
}
