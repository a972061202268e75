package tools

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
)

// next counts the calls that reach the layer below.
type next struct{ reached int }

func (n *next) Call(context.Context, *call.Call) call.Result {
	n.reached++
	return call.Result{Text: "ran"}
}

// fakeNames knows one tool and lets a registry provide another; withheld
// says why a third is not offered.
type fakeNames struct{ known, registry, withheld string }

func (f fakeNames) Known(tool string) bool        { return tool == f.known }
func (f fakeNames) RegistryName(tool string) bool { return tool == f.registry }
func (f fakeNames) Withheld(tool string) error {
	if tool == f.withheld {
		return call.ErrNotTrusted
	}
	return nil
}

// fakeFetcher answers every fetch with change.
type fakeFetcher[C any] struct{ change *C }

func (f fakeFetcher[C]) Resolve(context.Context, string) (*C, error) { return f.change, nil }

// fakeAsking records the workflow it was asked to put to a person.
type fakeAsking struct{ asked **workflow.Workflow }

func (*fakeAsking) NeedsDialog(*call.Call, string, string, map[string]any) (call.Result, bool) {
	return call.Result{}, false
}
func (*fakeAsking) ApprovalFor(*workflow.Workflow) workflow.Approval { return workflow.Approval{} }
func (f *fakeAsking) AskInDialog(_ context.Context, _ *call.Call, wf *workflow.Workflow, _ workflow.Approval) call.Result {
	*f.asked = wf
	return call.Result{Text: "asked"}
}

func TestResolveLayerMarksRegistryNamesAndFailsTheRest(t *testing.T) {
	for _, tc := range []struct {
		tool         string
		reached      int
		fromRegistry bool
	}{
		{"local:tool", 1, false}, {"reg:tool", 1, true}, {"nosuch:tool", 0, false},
	} {
		n := &next{}
		l := ResolveLayer{Next: n, Names: fakeNames{known: "local:tool", registry: "reg:tool"}}
		c := call.NewCall(call.Request{Tool: tc.tool})
		res := l.Call(context.Background(), c)
		if n.reached != tc.reached || c.FromRegistry != tc.fromRegistry {
			t.Errorf("%s: reached %d, from registry %v (%s)", tc.tool, n.reached, c.FromRegistry, res.Text)
		}
		if tc.reached == 0 && !errors.Is(res.Err(), call.ErrNotFound) {
			t.Errorf("%s: %+v", tc.tool, res)
		}
	}
}

// An entry whose integrity changed is put to a person with the change as
// the workflow's payload, and nothing below runs; an unchanged one goes on.
func TestRegistryLayerAsksOnAnIntegrityChange(t *testing.T) {
	type change struct{ integrity string }
	var asked *workflow.Workflow
	for _, changed := range []bool{false, true} {
		n := &next{}
		l := RegistryLayer[change]{
			Next:     n,
			Registry: fakeFetcher[change]{change: map[bool]*change{true: {integrity: "sha256-new"}}[changed]},
			Ask:      &fakeAsking{asked: &asked},
		}
		c := call.NewCall(call.Request{Tool: "reg:tool", Workflows: workflow.NewWorkflows(time.Minute)})
		c.FromRegistry = true
		res := l.Call(context.Background(), c)
		switch {
		case !changed && (n.reached != 1 || asked != nil):
			t.Errorf("unchanged: reached %d, asked %v (%s)", n.reached, asked, res.Text)
		case changed && (n.reached != 0 || asked == nil || asked.Type != workflow.ApprovalIntegrity):
			t.Errorf("changed: reached %d, asked %+v (%s)", n.reached, asked, res.Text)
		case changed && asked.Data.(*change).integrity != "sha256-new":
			t.Errorf("the workflow carries %+v", asked.Data)
		}
	}
}

// A name the project's untrusted policy would offer is refused as not
// trusted, before any registry is asked.
func TestResolveLayerRefusesAWithheldName(t *testing.T) {
	n := &next{}
	l := ResolveLayer{Next: n, Names: fakeNames{registry: "mine:tool", withheld: "mine:tool"}}
	c := call.NewCall(call.Request{Tool: "mine:tool"})
	res := l.Call(context.Background(), c)
	if n.reached != 0 || c.FromRegistry || !errors.Is(res.Err(), call.ErrNotTrusted) {
		t.Errorf("reached %d, from registry %v: %+v", n.reached, c.FromRegistry, res)
	}
}
