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

func TestResolveLayerMarksRegistryNamesAndFailsTheRest(t *testing.T) {
	for _, tc := range []struct {
		tool         string
		reached      int
		fromRegistry bool
	}{
		{"local:tool", 1, false}, {"reg:tool", 1, true}, {"nosuch:tool", 0, false},
	} {
		n := &next{}
		l := ResolveLayer{
			Next:         n,
			Known:        func(tool string) bool { return tool == "local:tool" },
			RegistryName: func(tool string) bool { return tool == "reg:tool" },
		}
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
			Next: n,
			Fetch: func(context.Context, string) (*change, error) {
				if changed {
					return &change{integrity: "sha256-new"}, nil
				}
				return nil, nil
			},
			Ask: Asking{
				NeedsDialog: func(*call.Call, string, string, map[string]any) (call.Result, bool) { return call.Result{}, false },
				Approval:    func(*workflow.Workflow) workflow.Approval { return workflow.Approval{} },
				InDialog: func(_ context.Context, _ *call.Call, wf *workflow.Workflow, _ workflow.Approval) call.Result {
					asked = wf
					return call.Result{Text: "asked"}
				},
			},
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
