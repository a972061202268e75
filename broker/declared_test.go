package broker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pml-dev/pml/broker/call"
	sbx "github.com/pml-dev/pml/broker/sandbox"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/toolbox"
)

// withCapability adds the deno capability cap, whose one tool cap:main
// runs code (the fake Deno's: one "TOOL {args}" line per call) and whose
// registry metadata declares the tools declared.
func withCapability(t *testing.T, f *fixture, code string, declared ...string) {
	t.Helper()
	f.b.registry.SetDenoForTest("cap", &registry.Entry{FQDN: "acme.tools.cap.main.abcd", Type: registry.TypeDeno, Code: code,
		Meta: &registry.Metadata{Type: registry.TypeDeno, ToolsUsed: declared}})
	f.b.srv.ReplaceTools(nil, []toolbox.Tool{{Name: "cap:main", InputSchema: json.RawMessage(`{"type":"object"}`)}}, sbx.NewDenoExec(f.b.registry, f.b.runs))
}

// capCode writes to w.txt and runs a shell command: two calls that the
// permissions below ask about.
const capCode = `filesystem:write_file {"path": "w.txt", "content": "x"}
shell:exec {"command": "echo hi"}`

// askingRequest answers every approval in the client's dialog with
// choice and counts them.
func askingRequest(f *fixture, choice string, asked *atomic.Int32, questions *[]workflow.Approval) call.Request {
	return call.Request{Tool: "cap:main", Args: json.RawMessage(`{}`), Workflows: f.wf,
		Ask: func(ctx context.Context, a workflow.Approval) (string, bool) {
			asked.Add(1)
			*questions = append(*questions, a)
			return choice, true
		}}
}

func entriesOf(t *testing.T, f *fixture) []audit.Entry { return auditEntries(t, f.ws) }

// A declared tool that is denied refuses the run before it starts: no
// inner call, the one audit entry of the call, a message naming the tool
// and the rule.
func TestADeclaredDeniedToolRefusesTheRunBeforeItStarts(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["cap:*", "filesystem:*"], "deny": ["shell:exec"]}}`)
	withCapability(t, f, `filesystem:write_file {"path": "w.txt", "content": "x"}`, "filesystem:write_file", "shell:exec")
	res := f.call(t, "cap:main", map[string]any{})
	if !res.IsError || !strings.Contains(res.Text, "shell:exec") || !strings.Contains(res.Text, `deny pattern "shell:exec"`) || !strings.Contains(res.Text, "nothing ran") {
		t.Fatalf("refusal: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "w.txt")); err == nil {
		t.Error("the run started: its first call wrote w.txt")
	}
	es := entriesOf(t, f)
	if len(es) != 1 || es[0].Tool != "cap:main" || es[0].Decision != audit.Denied || !strings.Contains(es[0].Reason, "shell:exec") {
		t.Fatalf("audit: %+v", es)
	}
}

// Two declared tools that ask are one question before the run, in the
// client's dialog; the run's calls of them do not ask again and are
// audited as approved by that question.
func TestTwoDeclaredAskedToolsAreAskedOnceInTheDialog(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["cap:*"], "ask": ["filesystem:write_file", "shell:exec"]}}`)
	withCapability(t, f, capCode, "filesystem:write_file", "shell:exec")
	var asked atomic.Int32
	var qs []workflow.Approval
	res := f.b.Call(context.Background(), askingRequest(f, "continue", &asked, &qs))
	if res.IsError || !strings.Contains(res.Text, "ran echo hi") {
		t.Fatalf("run: %+v", res)
	}
	if asked.Load() != 1 {
		t.Fatalf("asked %d times, want once", asked.Load())
	}
	q := qs[0]
	if q.Tool != "cap:main" || !strings.Contains(q.Description, "filesystem:write_file, shell:exec") || strings.Contains(strings.Join(q.Options, ","), "always") {
		t.Errorf("the question: %+v", q)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "w.txt")); string(b) != "x" {
		t.Errorf("w.txt: %q", b)
	}
	for _, e := range entriesOf(t, f) {
		switch e.Tool {
		case "filesystem:write_file", "shell:exec":
			if e.Decision != audit.Approved || e.WorkflowID != q.WorkflowID || e.NotDeclaredBy != "" {
				t.Errorf("inner call: %+v (the approval was %s)", e, q.WorkflowID)
			}
		}
	}
}

// Without a dialog the one approval goes back to the client; its
// continue_workflow starts the run, which asks nothing more.
func TestTwoDeclaredAskedToolsAreOneRelayedApproval(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["cap:*"], "ask": ["filesystem:write_file", "shell:exec"]}}`)
	withCapability(t, f, capCode, "filesystem:write_file", "shell:exec")
	a := approvalOf(t, f.call(t, "cap:main", map[string]any{}))
	if got, _ := a.Context["asked_tools"].([]string); strings.Join(got, ",") != "filesystem:write_file,shell:exec" {
		t.Errorf("asked_tools: %v", a.Context["asked_tools"])
	}
	if _, err := os.Stat(filepath.Join(f.ws, "w.txt")); err == nil {
		t.Fatal("the run started before the approval")
	}
	res := f.call(t, "cap:main", map[string]any{"continue_workflow": map[string]any{"workflow_id": a.WorkflowID, "approved": true}})
	if _, again := res.Approval(); again || res.IsError || !strings.Contains(res.Text, "ran echo hi") {
		t.Fatalf("after continue: %+v", res)
	}
	always := f.call(t, "cap:main", map[string]any{})
	a2 := approvalOf(t, always)
	if res := f.call(t, "cap:main", map[string]any{"continue_workflow": map[string]any{"workflow_id": a2.WorkflowID, "approved": true, "always": true}}); !res.IsError || !strings.Contains(res.Text, "not offered") {
		t.Errorf("always for declared tools: %+v", res)
	}
}

// All declared tools allowed: no question, the run runs.
func TestDeclaredAllowedToolsAskNothing(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["cap:*", "filesystem:*", "shell:exec"]}}`)
	withCapability(t, f, capCode, "filesystem:write_file", "shell:exec")
	var asked atomic.Int32
	var qs []workflow.Approval
	res := f.b.Call(context.Background(), askingRequest(f, "continue", &asked, &qs))
	if res.IsError || !strings.Contains(res.Text, "ran echo hi") || asked.Load() != 0 {
		t.Fatalf("run: %+v, asked %d", res, asked.Load())
	}
	for _, e := range entriesOf(t, f) {
		if e.NotDeclaredBy != "" || e.Decision != audit.Allowed {
			t.Errorf("entry %+v", e)
		}
	}
}

// A call the capability did not declare is decided on its own (here it
// asks, a second question) and flagged in the audit; the declared one,
// approved up front, is not asked again.
func TestAnUndeclaredCallIsAskedOnItsOwnAndFlagged(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["cap:*"], "ask": ["filesystem:write_file", "shell:exec"]}}`)
	withCapability(t, f, capCode, "filesystem:write_file")
	var asked atomic.Int32
	var qs []workflow.Approval
	res := f.b.Call(context.Background(), askingRequest(f, "continue", &asked, &qs))
	if res.IsError || asked.Load() != 2 {
		t.Fatalf("run: %+v, asked %d (want the up-front question and the undeclared call's)", res, asked.Load())
	}
	if qs[0].Tool != "cap:main" || qs[1].Tool != "shell:exec" {
		t.Errorf("questions: %s, %s", qs[0].Tool, qs[1].Tool)
	}
	flagged := map[string]string{}
	for _, e := range entriesOf(t, f) {
		flagged[e.Tool] = e.NotDeclaredBy
	}
	if flagged["shell:exec"] != "cap:main" || flagged["filesystem:write_file"] != "" || flagged["cap:main"] != "" {
		t.Errorf("not_declared_by: %v", flagged)
	}
}

// A capability that declares nothing runs as before: each call on its
// own, nothing flagged.
func TestACapabilityDeclaringNothingIsUnchanged(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["cap:*", "shell:exec"], "ask": ["filesystem:write_file"]}}`)
	withCapability(t, f, capCode)
	var asked atomic.Int32
	var qs []workflow.Approval
	res := f.b.Call(context.Background(), askingRequest(f, "continue", &asked, &qs))
	if res.IsError || asked.Load() != 1 || qs[0].Tool != "filesystem:write_file" {
		t.Fatalf("run: %+v, asked %d", res, asked.Load())
	}
	for _, e := range entriesOf(t, f) {
		if e.NotDeclaredBy != "" {
			t.Errorf("flagged: %+v", e)
		}
	}
}

// A declared tool denied while the approval waited (a reload) refuses
// the approved run before it starts.
func TestADeclaredToolDeniedWhileTheApprovalWaitedRefusesTheRun(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["cap:*"], "ask": ["filesystem:write_file", "shell:exec"]}}`)
	withCapability(t, f, capCode, "filesystem:write_file", "shell:exec")
	a := approvalOf(t, f.call(t, "cap:main", map[string]any{}))
	p := f.b.perms.Current()
	p.Deny = []string{"shell:*"}
	if _, ok := f.b.perms.Replace(p, "a reload", f.b.perms.Generation()); !ok {
		t.Fatal("permissions not replaced")
	}
	res := f.call(t, "cap:main", map[string]any{"continue_workflow": map[string]any{"workflow_id": a.WorkflowID, "approved": true}})
	if !res.IsError || !strings.Contains(res.Text, "shell:exec") || !strings.Contains(res.Text, `deny pattern "shell:*"`) {
		t.Fatalf("after continue: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "w.txt")); err == nil {
		t.Error("the run started")
	}
}

// Relayed (no dialog), the undeclared call that pauses the run is
// flagged both in its "asked" entry and in the entry of the answer that
// ran it.
func TestAnUndeclaredCallAnsweredByRelayIsFlagged(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["cap:*", "filesystem:*"], "ask": ["shell:exec"]}}`)
	withCapability(t, f, capCode, "filesystem:write_file")
	a := approvalOf(t, f.call(t, "cap:main", map[string]any{}))
	if a.Tool != "shell:exec" {
		t.Fatalf("approval for %s", a.Tool)
	}
	res := f.call(t, "cap:main", map[string]any{"continue_workflow": map[string]any{"workflow_id": a.WorkflowID, "approved": true}})
	if res.IsError || !strings.Contains(res.Text, "ran echo hi") {
		t.Fatalf("after continue: %+v", res)
	}
	var shell []audit.Entry
	for _, e := range entriesOf(t, f) {
		if e.Tool == "shell:exec" {
			shell = append(shell, e)
		}
	}
	if len(shell) != 2 || shell[0].Decision != audit.Asked || shell[1].Decision != audit.Approved {
		t.Fatalf("shell:exec entries: %+v", shell)
	}
	for _, e := range shell {
		if e.NotDeclaredBy != "cap:main" {
			t.Errorf("not flagged: %+v", e)
		}
	}
}
