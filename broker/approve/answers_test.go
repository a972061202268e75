package approve

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/permit"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/audit"
)

func TestAnAnswerRunsTheCallThroughTheStepItWasHanded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(ap *Approver, wfs *Workflows, wf *Workflow) (*Call, Result)
		runs   bool
	}{
		{"approved in the client's dialog", func(ap *Approver, wfs *Workflows, wf *Workflow) (*Call, Result) {
			c := call.NewCall(call.Request{Tool: wf.Tool, Workflows: wfs,
				Ask: func(context.Context, workflow.Approval) (string, bool) { return "continue", true }})
			return c, ap.AskInDialog(context.Background(), c, wf, Approval{Tool: wf.Tool, WorkflowID: wf.ID})
		}, true},
		{"approved with continue_workflow", func(ap *Approver, wfs *Workflows, wf *Workflow) (*Call, Result) {
			c := call.NewCall(call.Request{Tool: call.ContinueTool, Workflows: wfs})
			c.Cont = &Continuation{WorkflowID: wf.ID, Approved: true}
			return c, ap.AnswerCall(context.Background(), c)
		}, true},
		{"aborted in the client's dialog", func(ap *Approver, wfs *Workflows, wf *Workflow) (*Call, Result) {
			c := call.NewCall(call.Request{Tool: wf.Tool, Workflows: wfs,
				Ask: func(context.Context, workflow.Approval) (string, bool) { return "abort", true }})
			return c, ap.AskInDialog(context.Background(), c, wf, Approval{Tool: wf.Tool, WorkflowID: wf.ID})
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakes(t)
			wfs := workflow.NewWorkflows(time.Minute)
			wf := wfs.Create(ApprovalToolPermission, "filesystem:write_file", map[string]any{"path": "a"}, "filesystem:*")
			c, res := tc.answer(f.ap, wfs, wf)
			if !tc.runs {
				if len(f.exec.ran) != 0 || !res.IsError {
					t.Fatalf("ran %v, result %+v", f.exec.ran, res)
				}
				return
			}
			if len(f.exec.ran) != 1 || f.exec.ran[0] != (ran{"filesystem:write_file", "filesystem:*"}) || res.Text != "ran" {
				t.Fatalf("ran %v; result %+v", f.exec.ran, res)
			}
			// The step notes what ran as allowed; the answering call's one
			// entry says a person approved it, in which workflow.
			if e, _ := c.Noted(); e.Decision != audit.Approved || e.WorkflowID != wf.ID || e.Tool != wf.Tool {
				t.Errorf("entry %+v", e)
			}
		})
	}
}

var errTest = errors.New("disk full")

// answering is a pml:continue_workflow call relaying an answer.
func answering(wfs *Workflows, id string, approved, always bool) *Call {
	c := call.NewCall(call.Request{Tool: call.ContinueTool, Workflows: wfs})
	c.Cont = &Continuation{WorkflowID: id, Approved: approved, Always: always}
	return c
}

// inDialog is a call from a client whose dialog answers choice.
func inDialog(wfs *Workflows, tool, choice string) *Call {
	return call.NewCall(call.Request{Tool: tool, Workflows: wfs,
		Ask: func(context.Context, workflow.Approval) (string, bool) { return choice, true }})
}

func TestARejectedAnswerRunsNothing(t *testing.T) {
	f := newFakes(t)
	wfs := workflow.NewWorkflows(time.Minute)
	wf := wfs.Create(ApprovalToolPermission, "filesystem:write_file", map[string]any{"path": "a"}, "filesystem:*")
	c := answering(wfs, wf.ID, false, false)
	res := f.ap.AnswerCall(context.Background(), c)
	if !res.IsError || res.Text != "Rejected: filesystem:write_file was not run." || len(f.exec.runs()) != 0 {
		t.Fatalf("%+v, ran %v", res, f.exec.runs())
	}
	if e, _ := c.Noted(); e.Decision != audit.Rejected || e.WorkflowID != wf.ID || e.Tool != wf.Tool {
		t.Errorf("entry %+v", e)
	}
	// Answered once: a second answer is refused, and runs nothing.
	if res := f.ap.AnswerCall(context.Background(), answering(wfs, wf.ID, true, false)); !res.IsError || len(f.exec.runs()) != 0 {
		t.Errorf("a second answer: %+v", res)
	}
}

func TestADialogsNoIsFinalAndSaysWhoAnswered(t *testing.T) {
	for choice, says := range map[string]string{
		"abort":     "Abort was chosen",
		"declined":  "the client declined",
		"cancelled": "no person answered",
	} {
		f := newFakes(t)
		wfs := workflow.NewWorkflows(time.Minute)
		wf := wfs.Create(ApprovalToolPermission, "filesystem:write_file", map[string]any{"path": "a"}, "filesystem:*")
		c := inDialog(wfs, wf.Tool, choice)
		res := f.ap.AskInDialog(context.Background(), c, wf, f.ap.Approval(wf))
		if !res.IsError || !errors.Is(res.Err(), call.ErrDenied) || !strings.Contains(res.Text, says) || !strings.Contains(res.Text, "This is final") {
			t.Errorf("%s: %+v", choice, res)
		}
		if m := res.Structured.(map[string]any); m["reason"] != DialogOutcome(choice) || len(f.exec.runs()) != 0 {
			t.Errorf("%s: structured %v, ran %v", choice, m, f.exec.runs())
		}
		// The model cannot overturn it by relaying another answer.
		again := f.ap.AnswerCall(context.Background(), answering(wfs, wf.ID, true, false))
		if !again.IsError || !strings.Contains(again.Text, "ended there") || len(f.exec.runs()) != 0 {
			t.Errorf("%s: relayed after the dialog: %+v", choice, again)
		}
	}
}

func TestAnExpiredWorkflowRunsNothing(t *testing.T) {
	f := newFakes(t)
	wfs := workflow.NewWorkflows(time.Minute)
	now := time.Now()
	wfs.SetClock(func() time.Time { return now })
	wf := wfs.Create(ApprovalToolPermission, "filesystem:write_file", nil, "filesystem:*")
	now = now.Add(2 * time.Minute)
	c := answering(wfs, wf.ID, true, false)
	res := f.ap.AnswerCall(context.Background(), c)
	if !res.IsError || !strings.Contains(res.Text, "expired") || len(f.exec.runs()) != 0 {
		t.Fatalf("%+v, ran %v", res, f.exec.runs())
	}
	if e, _ := c.Noted(); e.Decision != audit.Expired || e.WorkflowID != wf.ID {
		t.Errorf("entry %+v", e)
	}
}

func TestAlwaysIsSavedBeforeTheCallRuns(t *testing.T) {
	f := newFakes(t)
	wfs := workflow.NewWorkflows(time.Minute)
	wf := wfs.Create(ApprovalToolPermission, "filesystem:write_file", map[string]any{"path": "a"}, "filesystem:write_file")
	c := answering(wfs, wf.ID, true, true)
	if res := f.ap.AnswerCall(context.Background(), c); res.Text != "ran" {
		t.Fatalf("%+v", res)
	}
	raw, err := os.ReadFile(filepath.Join(f.ws, ".pml.json"))
	if err != nil || !strings.Contains(string(raw), `"filesystem:write_file"`) {
		t.Fatalf(".pml.json: %s %v", raw, err)
	}
	if d, _ := f.ap.Perms.Decide("filesystem:write_file"); d != call.Allow {
		t.Errorf("after always the tool is %s, want allowed at once", d)
	}
	if e, _ := c.Noted(); e.Decision != audit.Always || e.WorkflowID != wf.ID {
		t.Errorf("entry %+v", e)
	}
}

func TestAlwaysThatCannotHoldRunsNothingAndCanBeAnsweredAgain(t *testing.T) {
	t.Setenv("PML_PERMISSIONS_ALLOW", "filesystem:read_file")
	f := newFakes(t)
	wfs := workflow.NewWorkflows(time.Minute)
	wf := wfs.Create(ApprovalToolPermission, "filesystem:write_file", nil, "filesystem:*")
	if a := f.ap.Approval(wf); slices.Contains(a.Options, "always") || a.Context["always_not_offered"] == nil {
		t.Errorf("always offered where it cannot hold: %+v", a)
	}
	res := f.ap.AnswerCall(context.Background(), answering(wfs, wf.ID, true, true))
	if !errors.Is(res.Err(), call.ErrInvalidInput) || len(f.exec.runs()) != 0 || !wfs.Pending(wf) {
		t.Fatalf("%+v, ran %v, pending %v", res, f.exec.runs(), wfs.Pending(wf))
	}
	if res := f.ap.AnswerCall(context.Background(), answering(wfs, wf.ID, true, false)); res.Text != "ran" {
		t.Errorf("answered again without always: %+v", res)
	}
}

func TestAnApprovedIntegrityChangeIsHandedToTheRegistry(t *testing.T) {
	f := newFakes(t)
	wfs := workflow.NewWorkflows(time.Minute)
	wf := wfs.Create(ApprovalIntegrity, "reg:tool", nil, "reg:*")
	if a := f.ap.ApprovalFor(wf); a.Description != "the entry changed" {
		t.Errorf("described by %q, not by the registry", a.Description)
	}
	c := answering(wfs, wf.ID, true, false)
	res := f.ap.AnswerCall(context.Background(), c)
	if res.Text != "integrity approved" || len(f.parts.approved) != 1 || len(f.exec.runs()) != 0 {
		t.Fatalf("%+v, approved %v, ran %v", res, f.parts.approved, f.exec.runs())
	}
}

// resumer is a payload that carries out the answer itself.
type resumer struct{ got []Answer }

func (r *resumer) Resume(_ context.Context, _ *Approver, c *Call, wfs *Workflows, wf *Workflow, a Answer) Result {
	r.got = append(r.got, a)
	wfs.Finish(wf)
	return Result{Text: "resumed"}
}

func TestAPayloadThatResumesGetsTheAnswerAndNothingElseRuns(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    func(wfs *Workflows, id string) *Call
		want Answer
	}{
		{"approved", func(wfs *Workflows, id string) *Call { return answering(wfs, id, true, false) }, Answer{Approved: true}},
		{"rejected", func(wfs *Workflows, id string) *Call { return answering(wfs, id, false, false) }, Answer{}},
	} {
		f := newFakes(t)
		wfs := workflow.NewWorkflows(time.Minute)
		wf := wfs.Create(ApprovalToolPermission, "filesystem:write_file", nil, "filesystem:*")
		p := &resumer{}
		wf.Data = p
		res := f.ap.AnswerCall(context.Background(), tc.c(wfs, wf.ID))
		if res.Text != "resumed" || len(p.got) != 1 || p.got[0] != tc.want || len(f.exec.runs()) != 0 {
			t.Errorf("%s: %+v, got %v, ran %v", tc.name, res, p.got, f.exec.runs())
		}
	}
	// A no in the dialog reaches the payload as the dialog's outcome.
	f := newFakes(t)
	wfs := workflow.NewWorkflows(time.Minute)
	wf := wfs.Create(ApprovalToolPermission, "filesystem:write_file", nil, "filesystem:*")
	p := &resumer{}
	wf.Data = p
	f.ap.AskInDialog(context.Background(), inDialog(wfs, wf.Tool, "declined"), wf, Approval{})
	if len(p.got) != 1 || p.got[0].Approved || p.got[0].Declined != DialogOutcome("declined") {
		t.Errorf("got %+v", p.got)
	}
}

func TestADeclaredRunDeniedWhileItWaitedDoesNotStart(t *testing.T) {
	f := newFakes(t)
	wfs := workflow.NewWorkflows(time.Minute)
	wf := wfs.Create(ApprovalToolPermission, "mathx:double", nil, "mathx:*")
	wf.Data = &call.Declared{Capability: "mathx:double", Tools: []string{"shell:exec"}, Asked: []string{"shell:exec"}}
	if a := f.ap.ApprovalFor(wf); slices.Contains(a.Options, "always") || a.Context["asked_tools"] == nil {
		t.Errorf("the approval of declared tools: %+v", a)
	}
	if res := f.ap.AnswerCall(context.Background(), answering(wfs, wf.ID, true, true)); !errors.Is(res.Err(), call.ErrInvalidInput) || len(f.exec.runs()) != 0 {
		t.Fatalf("always for declared tools: %+v", res)
	}
	f.ap.Perms.Replace(permit.Permissions{Deny: []string{"shell:*"}}, "test", f.ap.Perms.Generation())
	c := answering(wfs, wf.ID, true, false)
	res := f.ap.AnswerCall(context.Background(), c)
	if !errors.Is(res.Err(), call.ErrDenied) || len(f.exec.runs()) != 0 {
		t.Fatalf("%+v, ran %v", res, f.exec.runs())
	}
	if e, _ := c.Noted(); e.Decision != audit.Denied || e.Pattern != "shell:*" {
		t.Errorf("entry %+v", e)
	}
}
