package broker

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/permit"
	"github.com/pml-dev/pml/broker/workflow"
)

func (f *fixture) ask(t *testing.T, tool string, args any, choice string, shown bool) call.Result {
	t.Helper()
	raw, _ := json.Marshal(args)
	return f.b.Call(context.Background(), call.Request{Tool: tool, Args: raw, Workflows: f.wf,
		Ask: func(context.Context, workflow.Approval) (string, bool) { return choice, shown }})
}

func workflowOf(t *testing.T, r call.Result) string {
	t.Helper()
	m, ok := r.Structured.(map[string]any)
	if !ok {
		t.Fatalf("no workflow in %+v", r)
	}
	return m["workflow_id"].(string)
}

func TestADialogNoIsFinal(t *testing.T) {
	for _, choice := range []string{"declined", "cancelled", "not answered", "abort"} {
		f := newFixture(t, "")
		r := f.ask(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"}, choice, true)
		if !r.IsError || !errors.Is(r.Err(), call.ErrDenied) {
			t.Fatalf("%s: %+v", choice, r)
		}
		id := workflowOf(t, r)
		for _, relay := range []call.Result{
			f.call(t, call.ContinueTool, map[string]any{"workflow_id": id, "approved": true}),
			f.call(t, "filesystem:write_file", map[string]any{"continue_workflow": map[string]any{"workflow_id": id, "approved": true}}),
		} {
			if !relay.IsError || !errors.Is(relay.Err(), workflow.ErrAnsweredInDialog) || !strings.Contains(relay.Text, "ended there: "+approve.DialogOutcome(choice)) {
				t.Errorf("%s: relayed answer: %+v", choice, relay)
			}
		}
		if _, err := os.Stat(filepath.Join(f.ws, "b.txt")); err == nil {
			t.Fatalf("%s: the write ran", choice)
		}
	}
}

// A dialog the client closed (MCP elicitation "cancel": Claude Code in
// print mode does it with nobody there) is never told as a person's answer.
func TestADialogTheClientClosedSaysNoPersonAnswered(t *testing.T) {
	f := newFixture(t, "")
	r := f.ask(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"}, "cancelled", true)
	if !r.IsError || !strings.Contains(r.Text, "the client closed pml's dialog; no person answered") || strings.Contains(r.Text, "the person") {
		t.Fatalf("%s", r.Text)
	}
	// A client that shows the model only the structured result (codex)
	// says the same.
	if m, _ := r.Structured.(map[string]any); m["reason"] != "the client closed pml's dialog; no person answered" {
		t.Fatalf("structured: %+v", r.Structured)
	}
	r = f.ask(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"}, "declined", true)
	if !strings.Contains(r.Text, "the client declined pml's dialog") {
		t.Fatalf("%s", r.Text)
	}
}

func TestADialogThatFailsFallsBackToTheRelay(t *testing.T) {
	f := newFixture(t, "")
	a := approvalOf(t, f.ask(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"}, "", false))
	if r := f.call(t, call.ContinueTool, map[string]any{"workflow_id": a.WorkflowID, "approved": true}); r.IsError {
		t.Fatalf("relay after a failed dialog: %s", r.Text)
	}
}

func TestRequireElicitationFailsClosed(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": []}, "hil": {"require_elicitation": true}}`)
	r := f.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"})
	if !r.IsError || !errors.Is(r.Err(), call.ErrDenied) || !strings.Contains(r.Text, "require_elicitation") {
		t.Fatalf("%+v", r)
	}
	if _, ok := r.Structured.(workflow.Approval); ok {
		t.Fatal("an approval was offered")
	}
	// A failing dialog fails closed too.
	if r := f.ask(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"}, "", false); !r.IsError {
		t.Fatalf("%+v", r)
	}
	// The dialog itself still works.
	if r := f.ask(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"}, "continue", true); r.IsError {
		t.Fatalf("%+v", r)
	}
}

func TestAlwaysMovesAnExactAskNameToAllow(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": [], "ask": ["filesystem:write_file", "filesystem:*"]}}`)
	a := approvalOf(t, f.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"}))
	if r := f.call(t, call.ContinueTool, map[string]any{"workflow_id": a.WorkflowID, "approved": true, "always": true}); r.IsError {
		t.Fatal(r.Text)
	}
	if r := f.call(t, "filesystem:write_file", map[string]any{"path": "c.txt", "content": "y"}); r.IsError || r.Structured != nil && func() bool { _, ok := r.Structured.(workflow.Approval); return ok }() {
		t.Fatalf("asked again: %+v", r)
	}
	// A glob in ask stays, and other tools it matches are still asked.
	approvalOf(t, f.call(t, "filesystem:create_directory", map[string]any{"path": "d"}))
}

func TestAlwaysIsNotOfferedWhenTheEnvironmentHoldsTheAskList(t *testing.T) {
	t.Setenv("PML_PERMISSIONS_ASK", "filesystem:write_file")
	f := newFixture(t, `{"permissions": {"allow": []}}`)
	_ = f.b.perms.Change(func(p *permit.Permissions) error { p.Ask = []string{"filesystem:write_file"}; return nil }) // as config.Load would read it from the environment
	a := approvalOf(t, f.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"}))
	if len(a.Options) != 2 || a.Context["always_not_offered"] == nil {
		t.Fatalf("options %v, context %v", a.Options, a.Context)
	}
	r := f.call(t, call.ContinueTool, map[string]any{"workflow_id": a.WorkflowID, "approved": true, "always": true})
	if !r.IsError || !strings.Contains(r.Text, "not offered") {
		t.Fatalf("%+v", r)
	}
	// Answerable again without always.
	if r := f.call(t, call.ContinueTool, map[string]any{"workflow_id": a.WorkflowID, "approved": true}); r.IsError {
		t.Fatal(r.Text)
	}
}
