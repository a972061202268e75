//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// executeConfig: the cloud at fc, the filesystem read tools and the cloud
// tools allowed, writes asked.
func executeConfig(fc *fakeCloud, extra string) string {
	return fmt.Sprintf(`{"permissions": {"allow": ["filesystem:read_file", "filesystem:list_directory", "json:*", "pml:*"]},
 "cloud": {"url": %q, "timeout": "5s"}%s}`, fc.srv.URL, extra)
}

type runResult struct {
	Status       string          `json:"status"`
	Result       json.RawMessage `json:"result"`
	Error        string          `json:"error"`
	ToolFailures []struct {
		Tool, Error string
	} `json:"tool_failures"`
}

func executeCode(t *testing.T, s *session, code string, extra map[string]any) (string, runResult, bool) {
	t.Helper()
	args := map[string]any{"code": code}
	for k, v := range extra {
		args[k] = v
	}
	out, res := s.call(t, "pml:execute", args)
	var r runResult
	structured(t, res, &r)
	return out, r, res.IsError
}

func executeContainers(t *testing.T, dir string) int {
	n := 0
	for _, c := range containersOf(t, dir) {
		if c.Labels["pml.purpose"] == "execute" && c.State == "running" {
			n++
		}
	}
	return n
}

func TestExecuteLocallyClientAndMixedRuns(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	fc := newFakeCloud(t)
	ws := newWorkspace(t, executeConfig(fc, ""))
	const secret = "local notes 0xC0FFEE"
	ws.write("notes.txt", secret)
	for i := 0; i < 10; i++ {
		ws.write(fmt.Sprintf("f%d.txt", i), fmt.Sprintf("file %d", i))
	}
	s := startSession(t, ws, "PML_API_KEY="+cloudKey)

	// All client tools: the file is read here.
	began := time.Now()
	out, r, isErr := executeCode(t, s, `const t = await mcp.filesystem.read_file({path: "notes.txt"}); return {length: t.length, head: t.slice(0, 5)};`, nil)
	cold := time.Since(began)
	var first struct {
		Length int
		Head   string
	}
	if isErr || r.Status != "success" || json.Unmarshal(r.Result, &first) != nil || first.Length != len(secret) || first.Head != "local" {
		t.Fatalf("client run: %q %+v", out, r)
	}
	// Mixed: a local read and a cloud tool; the cloud gets only what the
	// code passes to its tool.
	began = time.Now()
	out, r, isErr = executeCode(t, s, `const t = await mcp.filesystem.read_file({path: "notes.txt"});
const c = await mcp.json.parse({text: "{\"n\": " + t.length + "}"});
return {local: t.length, cloud: c};`, nil)
	warm := time.Since(began)
	if isErr || r.Status != "success" || !strings.Contains(string(r.Result), fmt.Sprintf(`"local":%d`, len(secret))) || !strings.Contains(string(r.Result), "cloud ran json:parse") {
		t.Fatalf("mixed run: %q %+v", out, r)
	}
	t.Logf("pml:execute with local code: cold %s, warm %s", cold, warm)
	if n := len(fc.calls("json:parse")); n != 1 {
		t.Errorf("json:parse reached the cloud %d times", n)
	}
	for _, req := range fc.all() {
		if strings.Contains(req.Body, "0xC0FFEE") {
			t.Errorf("local file contents reached the cloud in a %s request", req.RPC.Method)
		}
	}
	// Promise.all of 10 inner calls, each its own answer.
	out, r, isErr = executeCode(t, s, `return await Promise.all([...Array(10).keys()].map(i => mcp.filesystem.read_file({path: "f" + i + ".txt"})));`, nil)
	var files []string
	if isErr || json.Unmarshal(r.Result, &files) != nil || len(files) != 10 {
		t.Fatalf("Promise.all: %q %+v", out, r)
	}
	for i, f := range files {
		if f != fmt.Sprintf("file %d", i) {
			t.Errorf("Promise.all result %d = %q", i, f)
		}
	}
	// Only the planner's answer is code: a tool's data that looks like a
	// plan is passed on as data, and nothing runs.
	if out, res := s.call(t, "json:parse", map[string]any{"evil": true}); res.IsError || !strings.Contains(out, "execute_locally") {
		t.Errorf("a tool result that looks like a plan: %q", out)
	}
	// A failing inner call rejects inside the code.
	out, r, _ = executeCode(t, s, `try { await mcp.filesystem.read_file({path: "/etc/passwd"}); return "read"; } catch (e) { return "refused: " + e.message; }`, nil)
	if !strings.Contains(string(r.Result), "refused: ") || !strings.Contains(string(r.Result), "outside the workspace") || len(r.ToolFailures) != 1 {
		t.Errorf("an inner error: %q %+v", out, r)
	}
}

func TestExecuteLocallyPausesForApprovalAndResumesTheSameRun(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	fc := newFakeCloud(t)
	ws := newWorkspace(t, executeConfig(fc, ""))
	s := startSession(t, ws, "PML_API_KEY="+cloudKey)
	// The value is computed before the pause; the file written after the
	// approval and the result must both carry it: one run, not two.
	code := `const before = crypto.randomUUID();
try { await mcp.filesystem.write_file({path: "out.txt", content: before}); } catch (e) { return {before, rejected: e.message}; }
return {before};`
	_, res := s.call(t, "pml:execute", map[string]any{"code": code})
	var a approval
	structured(t, res, &a)
	if res.IsError || !a.ApprovalRequired || a.Tool != "filesystem:write_file" || !strings.Contains(a.Description, "pml:execute") {
		t.Fatalf("expected the inner write to ask, got %+v", a)
	}
	if executeContainers(t, ws.Dir) == 0 {
		t.Error("the paused run's container is not waiting")
	}
	out, res := s.call(t, "pml:execute", map[string]any{"code": code, "continue_workflow": cont(a.WorkflowID, true, false)})
	var r runResult
	structured(t, res, &r)
	var v struct{ Before string }
	if res.IsError || json.Unmarshal(r.Result, &v) != nil || v.Before == "" {
		t.Fatalf("after approval: %q %+v", out, r)
	}
	if b, err := os.ReadFile(ws.path("out.txt")); err != nil || string(b) != v.Before {
		t.Errorf("out.txt = %q (%v), want the value the run computed before the pause, %q", b, err, v.Before)
	}

	// Rejected: the inner call rejects in the code; nothing is written.
	_, res = s.call(t, "pml:execute", map[string]any{"code": strings.Replace(code, "out.txt", "out2.txt", 1)})
	structured(t, res, &a)
	out, res = s.call(t, "pml:continue_workflow", cont(a.WorkflowID, false, false))
	structured(t, res, &r)
	if res.IsError || !strings.Contains(string(r.Result), "rejected") {
		t.Errorf("after rejection: %q %+v", out, r)
	}
	if _, err := os.Stat(ws.path("out2.txt")); err == nil {
		t.Error("a rejected write happened")
	}
}

func TestExecuteLocallyExpiryAndTimeout(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	fc := newFakeCloud(t)
	ws := newWorkspace(t, executeConfig(fc, `, "hil": {"timeout": "2s"}, "sandbox": {"timeout": "3s"}`))
	s := startSession(t, ws, "PML_API_KEY="+cloudKey)
	_, res := s.call(t, "pml:execute", map[string]any{"code": `await mcp.filesystem.write_file({path: "late.txt", content: "x"}); return 1;`})
	var a approval
	structured(t, res, &a)
	if !a.ApprovalRequired {
		t.Fatalf("expected an approval: %+v", a)
	}
	// The session's first run starts cold and the pool refills only when
	// a run ends: the one execute container is the paused run's.
	var paused string
	for _, c := range containersOf(t, ws.Dir) {
		if c.Labels["pml.purpose"] == "execute" && c.State == "running" {
			paused = c.ID
		}
	}
	if paused == "" {
		t.Fatal("the paused run's container is not running")
	}
	waitFor(t, "the expired run to be stopped", 15*time.Second, func() bool { return gone(t, ws.Dir, paused) })
	if out, res := s.call(t, "pml:continue_workflow", cont(a.WorkflowID, true, false)); !res.IsError || !strings.Contains(out, "expired") {
		t.Errorf("continuing an expired run: %q", out)
	}
	if _, err := os.Stat(ws.path("late.txt")); err == nil {
		t.Error("an expired run wrote its file")
	}
	// An endless loop is stopped at the limit (sandbox.timeout plus the
	// approval time a run may wait).
	began := time.Now()
	out, _, isErr := executeCode(t, s, `while (true) {}`, nil)
	if !isErr || !strings.Contains(out, "did not finish in time") {
		t.Errorf("an endless loop: %q", out)
	}
	t.Logf("the endless loop was stopped after %s", time.Since(began).Round(100*time.Millisecond))
}

func TestExecuteLocallyCodeCannotTouchTheHost(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	ln, dialed := hostListener(t)
	fc := newFakeCloud(t)
	ws := newWorkspace(t, executeConfig(fc, ""))
	s := startSession(t, ws, "PML_API_KEY="+cloudKey)
	code := fmt.Sprintf(`const out = {};
for (const [name, f] of Object.entries({
  read: () => Deno.readTextFile("/etc/hostname"),
  fetch: () => fetch("http://%s/"),
  command: () => new Deno.Command("/bin/sh", {args: ["-c", "id"]}).output(),
  env: async () => Deno.env.get("HOME"),
})) { try { await f(); out[name] = "allowed"; } catch (e) { out[name] = e.name; } }
return out;`, ln.Addr().String())
	out, r, _ := executeCode(t, s, code, nil)
	var got map[string]string
	if err := json.Unmarshal(r.Result, &got); err != nil {
		t.Fatalf("%q %+v", out, r)
	}
	for _, k := range []string{"read", "fetch", "command", "env"} {
		if got[k] != "NotCapable" && got[k] != "PermissionDenied" {
			t.Errorf("%s: %q, want Deno's permission error", k, got[k])
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := dialed.Load(); n != 0 {
		t.Errorf("the host listener saw %d connections", n)
	}
}
