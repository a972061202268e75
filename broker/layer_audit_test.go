package broker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/policies"
)

// auditEntries reads the workspace's audit log.
func auditEntries(t *testing.T, ws string) []audit.Entry {
	t.Helper()
	fh, err := os.Open(filepath.Join(ws, ".pml", "audit.jsonl"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []audit.Entry
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var e audit.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func (f *fixture) raw(tool, args string) call.Result {
	return f.b.Call(context.Background(), call.Request{Tool: tool, Args: json.RawMessage(args), Workflows: f.wf})
}

const auditTestConfig = `{"permissions": {"allow": ["filesystem:read_file", "tavily:*"], "ask": ["filesystem:write_file"], "deny": ["shell:*"]}}`

// TestEveryOutcomeLeavesExactlyOneAuditEntry drives the request path to
// each of its outcomes and checks that the call (the last one of each
// case; the steps before it only set it up) leaves one audit entry, with
// the decision that names the outcome.
func TestEveryOutcomeLeavesExactlyOneAuditEntry(t *testing.T) {
	write := map[string]any{"path": "b.txt", "content": "x"}
	ask := func(f *fixture) string { return approvalOf(t, f.call(t, "filesystem:write_file", write)).WorkflowID }
	cont := func(id string, approved, always bool) map[string]any {
		return map[string]any{"workflow_id": id, "approved": approved, "always": always}
	}
	now := func(call func() call.Result) func() call.Result { return call }
	cases := []struct {
		name string
		rt   *inProcess
		// call sets the case up and returns the call to count.
		call     func(f *fixture) func() call.Result
		decision string
		status   string
		reason   string
	}{
		{name: "ok", call: func(f *fixture) func() call.Result {
			return now(func() call.Result { return f.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"}) })
		}, decision: audit.Allowed, status: "ok"},
		{name: "tool error", call: func(f *fixture) func() call.Result {
			return now(func() call.Result { return f.call(t, "filesystem:read_file", map[string]any{"path": "missing.txt"}) })
		}, decision: audit.Allowed, status: "error"},
		{name: "denied", call: func(f *fixture) func() call.Result {
			return now(func() call.Result { return f.call(t, "shell:exec", map[string]any{"command": "true"}) })
		}, decision: audit.Denied},
		{name: "asked", call: func(f *fixture) func() call.Result {
			return now(func() call.Result { return f.call(t, "filesystem:write_file", write) })
		}, decision: audit.Asked},
		{name: "rejected", call: func(f *fixture) func() call.Result {
			id := ask(f)
			return func() call.Result { return f.call(t, call.ContinueTool, cont(id, false, false)) }
		}, decision: audit.Rejected},
		{name: "approved", call: func(f *fixture) func() call.Result {
			id := ask(f)
			return func() call.Result { return f.call(t, call.ContinueTool, cont(id, true, false)) }
		}, decision: audit.Approved, status: "ok"},
		{name: "always", call: func(f *fixture) func() call.Result {
			id := ask(f)
			return func() call.Result { return f.call(t, call.ContinueTool, cont(id, true, true)) }
		}, decision: audit.Always, status: "ok"},
		{name: "approved in the dialog", call: func(f *fixture) func() call.Result {
			return now(func() call.Result { return f.ask(t, "filesystem:write_file", write, "continue", true) })
		}, decision: audit.Approved, status: "ok"},
		{name: "declined in the dialog", call: func(f *fixture) func() call.Result {
			return now(func() call.Result { return f.ask(t, "filesystem:write_file", write, "declined", true) })
		}, decision: audit.Rejected},
		{name: "unknown tool", call: func(f *fixture) func() call.Result {
			return now(func() call.Result { return f.call(t, "nosuchtool", nil) })
		}, decision: audit.Failed, reason: "no such tool"},
		{name: "arguments not an object", call: func(f *fixture) func() call.Result {
			return now(func() call.Result { return f.raw("filesystem:read_file", `[1]`) })
		}, decision: audit.Failed, reason: "arguments are not a JSON object"},
		{name: "malformed continue_workflow", call: func(f *fixture) func() call.Result {
			return now(func() call.Result {
				return f.call(t, "filesystem:write_file", map[string]any{"continue_workflow": "yes"})
			})
		}, decision: audit.Failed, reason: "continue_workflow is malformed"},
		{name: "malformed pml:continue_workflow", call: func(f *fixture) func() call.Result {
			return now(func() call.Result { return f.call(t, call.ContinueTool, map[string]any{"approved": true}) })
		}, decision: audit.Failed, reason: "continue_workflow is malformed"},
		{name: "path outside", call: func(f *fixture) func() call.Result {
			return now(func() call.Result { return f.call(t, "filesystem:read_file", map[string]any{"path": "../x"}) })
		}, decision: audit.PathBlocked, status: "error"},
		{name: "unknown workflow", call: func(f *fixture) func() call.Result {
			return now(func() call.Result {
				return f.call(t, call.ContinueTool, cont("00000000-0000-4000-8000-000000000000", true, false))
			})
		}, decision: audit.Failed, reason: "continuation refused"},
		{name: "expired workflow", call: func(f *fixture) func() call.Result {
			id := ask(f)
			f.wf.SetClock(func() time.Time { return time.Now().Add(time.Hour) })
			return func() call.Result { return f.call(t, call.ContinueTool, cont(id, true, false)) }
		}, decision: audit.Expired},
		{name: "relay refused after the dialog", call: func(f *fixture) func() call.Result {
			id := workflowOf(t, f.ask(t, "filesystem:write_file", write, "declined", true))
			return func() call.Result { return f.call(t, call.ContinueTool, cont(id, true, false)) }
		}, decision: audit.Rejected, reason: "relayed answer refused"},
		{name: "timeout", rt: &inProcess{hang: true}, call: func(f *fixture) func() call.Result {
			p := f.b.sb.Policy()
			p.Timeout = policies.Duration(time.Millisecond)
			f.b.sb.SetPolicy(p)
			return now(func() call.Result { return f.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"}) })
		}, decision: audit.Allowed, status: "error"},
		{name: "unavailable", rt: &inProcess{fail: container.ErrUnavailable}, call: func(f *fixture) func() call.Result {
			return now(func() call.Result { return f.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"}) })
		}, decision: audit.Allowed, status: "error"},
		{name: "local mode", call: func(f *fixture) func() call.Result {
			f.b.cloud.Router().AddServer("tavily")
			return now(func() call.Result { return f.call(t, "tavily:search", map[string]any{"query": "q"}) })
		}, decision: audit.Failed, reason: "local mode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PML_API_KEY", "")
			rt := tc.rt
			if rt == nil {
				rt = &inProcess{}
			}
			f := newFixtureOn(t, auditTestConfig, rt)
			call := tc.call(f)
			before := len(auditEntries(t, f.ws))
			res := call()
			after := auditEntries(t, f.ws)
			if len(after) != before+1 {
				t.Fatalf("%d audit entries for one call, want 1 (result %q):\n%+v", len(after)-before, res.Text, after[before:])
			}
			e := after[before]
			if e.Decision != tc.decision || e.ExitStatus != tc.status || tc.reason != "" && e.Reason != tc.reason {
				t.Errorf("audit entry %+v, want decision %q, exit status %q, reason %q (result %q)", e, tc.decision, tc.status, tc.reason, res.Text)
			}
			if e.Tool == "" {
				t.Errorf("audit entry without a tool: %+v", e)
			}
		})
	}
}

func TestAuditLayerWritesOneEntryWhateverTheStepsNoted(t *testing.T) {
	cases := []struct {
		name  string
		steps func(c *call.Call)
		res   call.Result
		want  audit.Entry
	}{
		{"nothing noted, invalid input", func(*call.Call) {}, errorResult(call.ErrInvalidInput), audit.Entry{Tool: "t", Decision: audit.Failed, Reason: "invalid_input"}},
		{"nothing noted, not found", func(*call.Call) {}, errorResult(call.ErrNotFound), audit.Entry{Tool: "t", Decision: audit.Failed, Reason: "not_found"}},
		{"nothing noted, an error", func(*call.Call) {}, errorResult(errors.New("x")), audit.Entry{Tool: "t", Decision: audit.Failed, Reason: "error"}},
		{"nothing noted, a success", func(*call.Call) {}, call.Result{}, audit.Entry{Tool: "t", Decision: audit.Failed, Reason: "not recorded by any step"}},
		{"the last note wins", func(c *call.Call) {
			c.Note(audit.Entry{Tool: "t", Decision: audit.Asked, WorkflowID: "w"})
			c.Note(audit.Entry{Tool: "t", Decision: audit.Approved, WorkflowID: "w", ExitStatus: "ok"})
		}, call.Result{}, audit.Entry{Tool: "t", Decision: audit.Approved, WorkflowID: "w", ExitStatus: "ok"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			sink := audit.New(filepath.Join(ws, ".pml", "audit.jsonl"))
			next := call.HandlerFunc(func(_ context.Context, c *call.Call) call.Result { tc.steps(c); return tc.res })
			l := auditLayer{next: next, log: zerolog.Nop(), sink: sink}
			l.Call(context.Background(), call.NewCall(call.Request{Tool: "t"}))
			got := auditEntries(t, ws)
			if len(got) != 1 {
				t.Fatalf("%d entries: %+v", len(got), got)
			}
			e := got[0]
			if e.Tool != tc.want.Tool || e.Decision != tc.want.Decision || e.Reason != tc.want.Reason || e.WorkflowID != tc.want.WorkflowID || e.ExitStatus != tc.want.ExitStatus {
				t.Fatalf("entry %+v, want %+v", e, tc.want)
			}
		})
	}
}
