//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestExecuteLocallyDeclaredDenyRefusedUpFront: issue 51 item 11. The
// cloud's execute_locally answer declares the tools its code calls
// (tools_used, client_tools: filesystem:read_file in the fake). With that
// tool denied, pml:execute is refused before any Deno container starts:
// the result names the tool and the pattern, the code never ran (its
// cloud call never reached the cloud), and the call leaves one audit
// entry, denied by that pattern.
func TestExecuteLocallyDeclaredDenyRefusedUpFront(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	fc := newFakeCloud(t)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["json:*", "pml:*"], "deny": ["filesystem:read_file"]},
 "cloud": {"url": %q, "timeout": "5s"}}`, fc.srv.URL))
	ws.write("notes.txt", "secret notes")
	s := startSession(t, ws, "PML_API_KEY="+cloudKey)

	before := auditLen(t, ws)
	// Were it run, the code would reach the cloud (json:parse) first.
	out, res := s.call(t, "pml:execute", map[string]any{"code": `await mcp.json.parse({text: "{}"}); try { return await mcp.filesystem.read_file({path: "notes.txt"}); } catch (e) { return "refused inside: " + e.message; }`})
	if !res.IsError || !strings.Contains(out, "filesystem:read_file") || !strings.Contains(out, `deny pattern "filesystem:read_file"`) || !strings.Contains(out, "nothing ran") {
		t.Fatalf("pml:execute with a denied declared tool: want it refused up front naming the tool and pattern, got %q (error %v)", out, res.IsError)
	}
	if n := len(fc.calls("json:parse")); n != 0 {
		t.Errorf("the code ran: its json:parse reached the cloud %d times", n)
	}
	for _, c := range containersOf(t, ws.Dir) {
		if c.Labels["pml.purpose"] == "execute" {
			t.Errorf("a Deno container was started for a refused run: %s (%s)", c.ID[:12], c.State)
		}
	}
	lines := strings.Split(strings.TrimSpace(readAudit(t, ws)), "\n")[before:]
	if len(lines) != 1 {
		t.Fatalf("want one audit entry for the refused run, got %d:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	var e struct{ Tool, Decision, Pattern, Reason string }
	if err := json.Unmarshal([]byte(lines[0]), &e); err != nil {
		t.Fatal(err)
	}
	if e.Tool != "pml:execute" || e.Decision != "denied" || e.Pattern != "filesystem:read_file" || !strings.Contains(e.Reason, "filesystem:read_file") {
		t.Errorf("audit entry: %+v, want pml:execute denied by filesystem:read_file", e)
	}

	// Allowed, the same answer runs: the up-front check refuses only what
	// is denied.
	ws2 := newWorkspace(t, executeConfig(fc, ""))
	ws2.write("notes.txt", "secret notes")
	s2 := startSession(t, ws2, "PML_API_KEY="+cloudKey)
	if out, r, isErr := executeCode(t, s2, `return await mcp.filesystem.read_file({path: "notes.txt"});`, nil); isErr || r.Status != "success" || !strings.Contains(string(r.Result), "secret notes") {
		t.Errorf("allowed declared tool: %q %+v", out, r)
	}
}

// TestExecuteLocallyDeclaredAskIsApprovedOnceUpFront: the same answer,
// its declared tool asked about: the person is asked once, before any
// Deno container starts, naming the tool; approved, that code runs (the
// cloud is not asked again) and its calls of the tool do not ask again,
// each audited as approved under that approval.
func TestExecuteLocallyDeclaredAskIsApprovedOnceUpFront(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	fc := newFakeCloud(t)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["json:*", "pml:*"], "ask": ["filesystem:read_file"]},
 "cloud": {"url": %q, "timeout": "5s"}}`, fc.srv.URL))
	ws.write("a.txt", "alpha")
	ws.write("b.txt", "beta")
	s := startSession(t, ws, "PML_API_KEY="+cloudKey)

	code := `const a = await mcp.filesystem.read_file({path: "a.txt"}); const b = await mcp.filesystem.read_file({path: "b.txt"}); return a + "+" + b;`
	_, res := s.call(t, "pml:execute", map[string]any{"code": code})
	var a struct {
		approval
		Context map[string]any `json:"context"`
	}
	structured(t, res, &a)
	if res.IsError || !a.ApprovalRequired || a.Tool != "pml:execute" || !strings.Contains(a.Description, "filesystem:read_file") || !strings.Contains(a.Description, "declares") {
		t.Fatalf("want one approval of pml:execute naming its declared filesystem:read_file, got %+v", a)
	}
	if got := fmt.Sprint(a.Context["asked_tools"]); got != "[filesystem:read_file]" {
		t.Errorf("asked_tools = %s", got)
	}
	for _, c := range containersOf(t, ws.Dir) {
		if c.Labels["pml.purpose"] == "execute" {
			t.Errorf("a Deno container was started before the approval: %s (%s)", c.ID[:12], c.State)
		}
	}
	out, res := s.call(t, "pml:execute", map[string]any{"code": code, "continue_workflow": cont(a.WorkflowID, true, false)})
	var r runResult
	structured(t, res, &r)
	if res.IsError || r.Status != "success" || string(r.Result) != `"alpha+beta"` {
		t.Fatalf("after the one approval: %q %+v", out, r)
	}
	if n := len(fc.calls("pml:execute")); n != 1 {
		t.Errorf("the cloud was asked %d times for the plan, want once (the approved code runs)", n)
	}
	var reads int
	for _, line := range strings.Split(strings.TrimSpace(readAudit(t, ws)), "\n") {
		var e struct {
			Tool, Decision string
			WorkflowID     string `json:"workflow_id"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if e.Tool == "filesystem:read_file" {
			reads++
			if e.Decision != "approved" || e.WorkflowID != a.WorkflowID {
				t.Errorf("an inner read: %+v, want approved under %s", e, a.WorkflowID)
			}
		}
	}
	if reads != 2 {
		t.Errorf("%d inner reads audited, want 2", reads)
	}
}
