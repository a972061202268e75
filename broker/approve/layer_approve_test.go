package approve

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/config"
)

// layerCall is a call as the approve layer gets it: decided by the
// permit layer, from a client without a dialog.
func layerCall(wfs *Workflows, tool string, d call.Decision) *Call {
	c := call.NewCall(call.Request{Tool: tool, Workflows: wfs})
	c.Args, c.Decision, c.Pattern = map[string]any{"path": "a.txt"}, d, "pattern-of-"+tool
	return c
}

func TestTheApproveLayerAsksWhatNeedsAPersonAndPassesTheRest(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tool     string
		decision call.Decision
		set      func(p *fakeParts)
		asks     workflow.ApprovalType // "" when the call goes on
	}{
		{"an allowed call goes on", "filesystem:read_file", call.Allow, nil, ""},
		{"an ask permission asks", "filesystem:write_file", call.Ask, nil, ApprovalToolPermission},
		{"a server not installed asks to install it", "npmsrv:search", call.Ask, func(p *fakeParts) {
			p.servers["npmsrv"] = config.Server{Name: "npmsrv", Image: "node", Install: &config.Install{Command: "npm", Args: []string{"install", "npmsrv@1.2.3"}}}
		}, ApprovalDependency},
		{"an allowed server not installed installs without asking", "npmsrv:search", call.Allow, func(p *fakeParts) {
			p.servers["npmsrv"] = config.Server{Name: "npmsrv", Image: "node", Install: &config.Install{Command: "npm", Args: []string{"install", "npmsrv"}}}
		}, ""},
		{"a cloud tool missing its key asks for it", "tavily:search", call.Allow, func(p *fakeParts) {
			p.cloud["tavily:search"], p.missing["tavily:search"] = true, []string{"TAVILY_API_KEY"}
		}, ApprovalAPIKey},
		{"a cloud tool missing its key under ask asks the permission", "tavily:search", call.Ask, func(p *fakeParts) {
			p.cloud["tavily:search"], p.missing["tavily:search"] = true, []string{"TAVILY_API_KEY"}
		}, ApprovalToolPermission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakes(t)
			if tc.set != nil {
				tc.set(f.parts)
			}
			next := &fakeExec{}
			wfs := workflow.NewWorkflows(time.Minute)
			c := layerCall(wfs, tc.tool, tc.decision)
			res := Layer{Next: next, Ask: f.ap}.Call(context.Background(), c)
			if tc.asks == "" {
				if len(next.runs()) != 1 || res.Text != "ran" {
					t.Fatalf("the call did not go on: %v %+v", next.runs(), res)
				}
				return
			}
			a, ok := res.Approval()
			if !ok || a.ApprovalType != tc.asks || a.Tool != tc.tool {
				t.Fatalf("want an approval of type %s, got %+v", tc.asks, res)
			}
			if len(next.runs()) != 0 || len(f.exec.runs()) != 0 {
				t.Fatalf("something ran before the person answered: %v %v", next.runs(), f.exec.runs())
			}
			if e, _ := c.Noted(); e.Decision != audit.Asked || e.WorkflowID != a.WorkflowID || e.Pattern != c.Pattern {
				t.Errorf("entry %+v", e)
			}
		})
	}
}

func TestACloudToolInLocalModeFailsBeforeAnyoneIsAsked(t *testing.T) {
	f := newFakes(t)
	f.parts.cloud["tavily:search"], f.parts.cloudOn = true, false
	f.parts.missing["tavily:search"] = []string{"TAVILY_API_KEY"}
	wfs := workflow.NewWorkflows(time.Minute)
	c := layerCall(wfs, "tavily:search", call.Ask)
	res := Layer{Next: f.exec, Ask: f.ap}.Call(context.Background(), c)
	if !res.IsError || f.parts.local != 1 || wfs.Len() != 0 || len(f.exec.runs()) != 0 {
		t.Fatalf("result %+v, local %d, workflows %d", res, f.parts.local, wfs.Len())
	}
	if e, _ := c.Noted(); e.Decision != audit.Failed || e.Reason != "local mode" {
		t.Errorf("entry %+v", e)
	}
}

func TestARegistryGrantIsAskedWhateverThePermission(t *testing.T) {
	f := newFakes(t)
	var recorded []string
	f.ap.GrantApproval = func(wf *Workflow) Approval {
		return Approval{ApprovalType: wf.Type, WorkflowID: wf.ID, Tool: wf.Tool, Options: []string{"continue", "abort"}}
	}
	f.ap.RecordGrant = func(wf *Workflow) error { recorded = append(recorded, wf.Data.(string)); return nil }
	wfs := workflow.NewWorkflows(time.Minute)
	c := layerCall(wfs, "reg:tool", call.Allow)
	l := Layer{Next: f.ap.Execute, Ask: f.ap, GrantNeeded: func(string) (any, bool) { return "env HOME", true }}
	a, ok := l.Call(context.Background(), c).Approval()
	if !ok || a.ApprovalType != ApprovalRegistryGrant || len(f.exec.runs()) != 0 {
		t.Fatalf("an allowed call whose entry asks a grant ran or did not ask: %+v %v", a, f.exec.runs())
	}
	ans := call.NewCall(call.Request{Tool: call.ContinueTool, Workflows: wfs})
	ans.Cont = &Continuation{WorkflowID: a.WorkflowID, Approved: true}
	if res := f.ap.AnswerCall(context.Background(), ans); res.Text != "ran" {
		t.Fatalf("approved grant: %+v", res)
	}
	if len(recorded) != 1 || recorded[0] != "env HOME" || len(f.exec.runs()) != 1 {
		t.Errorf("recorded %v, ran %v", recorded, f.exec.runs())
	}
}

func TestAGrantThatCannotBeRecordedRunsNothingAndCanBeAnsweredAgain(t *testing.T) {
	f := newFakes(t)
	f.ap.RecordGrant = func(*Workflow) error { return errTest }
	wfs := workflow.NewWorkflows(time.Minute)
	wf := wfs.Create(ApprovalRegistryGrant, "reg:tool", map[string]any{}, "reg:*")
	c := answering(wfs, wf.ID, true, false)
	res := f.ap.AnswerCall(context.Background(), c)
	if !res.IsError || !strings.Contains(res.Text, "could not record the grant for reg:tool") || len(f.exec.runs()) != 0 {
		t.Fatalf("%+v, ran %v", res, f.exec.runs())
	}
	if !wfs.Pending(wf) {
		t.Error("the workflow was not released: the person cannot answer again")
	}
}

func TestACallApprovedUpFrontRunsWithoutAskingAgain(t *testing.T) {
	f := newFakes(t)
	wfs := workflow.NewWorkflows(time.Minute)
	d := &call.Declared{Capability: "mathx:double", Tools: []string{"filesystem:write_file"}, Asked: []string{"filesystem:write_file"}, WorkflowID: "wf-up-front"}
	ctx := context.Background()
	c := layerCall(wfs, "filesystem:write_file", call.Ask)
	c.Req.Run = d
	res := Layer{Next: f.ap.Execute, Ask: f.ap}.Call(ctx, c)
	if res.Text != "ran" || wfs.Len() != 0 {
		t.Fatalf("%+v, %d workflows", res, wfs.Len())
	}
	if e, _ := c.Noted(); e.Decision != audit.Approved || e.WorkflowID != "wf-up-front" {
		t.Errorf("entry %+v: the run's approval let it through", e)
	}
	// A call the run did not declare asks on its own.
	other := layerCall(wfs, "filesystem:edit_file", call.Ask)
	if _, ok := (Layer{Next: f.ap.Execute, Ask: f.ap}).Call(ctx, other).Approval(); !ok {
		t.Error("an undeclared call of the run was not asked")
	}
}

func TestRequireElicitationWithoutADialogRefusesBeforeAnyWorkflow(t *testing.T) {
	f := newFakes(t)
	f.ap.Config.HIL.RequireElicitation = true
	wfs := workflow.NewWorkflows(time.Minute)
	c := layerCall(wfs, "filesystem:write_file", call.Ask)
	res := Layer{Next: f.exec, Ask: f.ap}.Call(context.Background(), c)
	if !res.IsError || !strings.Contains(res.Text, "hil.require_elicitation") || wfs.Len() != 0 || len(f.exec.runs()) != 0 {
		t.Fatalf("%+v, %d workflows", res, wfs.Len())
	}
	if e, _ := c.Noted(); e.Decision != audit.Rejected {
		t.Errorf("entry %+v", e)
	}
}
