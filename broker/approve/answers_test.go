package approve

import (
	"context"
	"testing"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/config"
)

// ran is one call of the execute step an Approver was handed.
type ran struct{ tool, decision, pattern, workflowID string }

// approverRunning is an Approver whose execute step records its calls:
// an approved call runs through what the broker hands it, nothing else.
func approverRunning(runs *[]ran) *Approver {
	return &Approver{
		Config: &config.Config{},
		Paused: func(*Workflow) bool { return false },
		Run: func(_ context.Context, _ *Call, name string, _ map[string]any, decision, pattern, workflowID string) Result {
			*runs = append(*runs, ran{name, decision, pattern, workflowID})
			return Result{Text: "ran"}
		},
	}
}

func TestAnAnswerRunsTheCallThroughTheStepItWasHanded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(ap *Approver, wfs *Workflows, wf *Workflow) Result
		runs   bool
	}{
		{"approved in the client's dialog", func(ap *Approver, wfs *Workflows, wf *Workflow) Result {
			c := call.NewCall(call.Request{Tool: wf.Tool, Workflows: wfs,
				Ask: func(context.Context, workflow.Approval) (string, bool) { return "continue", true }})
			return ap.AskInDialog(context.Background(), c, wf, Approval{Tool: wf.Tool, WorkflowID: wf.ID})
		}, true},
		{"approved with continue_workflow", func(ap *Approver, wfs *Workflows, wf *Workflow) Result {
			c := call.NewCall(call.Request{Tool: call.ContinueTool, Workflows: wfs})
			c.Cont = &Continuation{WorkflowID: wf.ID, Approved: true}
			return ap.AnswerCall(context.Background(), c)
		}, true},
		{"aborted in the client's dialog", func(ap *Approver, wfs *Workflows, wf *Workflow) Result {
			c := call.NewCall(call.Request{Tool: wf.Tool, Workflows: wfs,
				Ask: func(context.Context, workflow.Approval) (string, bool) { return "abort", true }})
			return ap.AskInDialog(context.Background(), c, wf, Approval{Tool: wf.Tool, WorkflowID: wf.ID})
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs []ran
			ap := approverRunning(&runs)
			wfs := workflow.NewWorkflows(time.Minute)
			wf := wfs.Create(ApprovalToolPermission, "filesystem:write_file", map[string]any{"path": "a"}, "filesystem:*")
			res := tc.answer(ap, wfs, wf)
			if !tc.runs {
				if len(runs) != 0 || !res.IsError {
					t.Fatalf("ran %v, result %+v", runs, res)
				}
				return
			}
			want := []ran{{"filesystem:write_file", audit.Approved, "filesystem:*", wf.ID}}
			if len(runs) != 1 || runs[0] != want[0] || res.Text != "ran" {
				t.Fatalf("ran %v, want %v; result %+v", runs, want, res)
			}
		})
	}
}
