//go:build linux

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// auditEntry is what the test reads of pml audit --format json.
type auditEntry struct {
	Tool     string   `json:"tool"`
	Decision string   `json:"decision"`
	Pattern  string   `json:"pattern"`
	Reason   string   `json:"reason"`
	ArgKeys  []string `json:"arg_keys"`
}

func auditJSON(t *testing.T, ws *workspace, args ...string) []auditEntry {
	t.Helper()
	code, out, errOut := runPML(t, ws, append([]string{"audit", "--format", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("pml audit %v: exit %d\n%s", args, code, errOut)
	}
	var es []auditEntry
	if err := json.Unmarshal([]byte(out), &es); err != nil {
		t.Fatalf("pml audit %v: not one JSON array: %v\n%s", args, err, out)
	}
	return es
}

// Every tools/call leaves one entry, a call of a tool that does not exist
// included (the go-sdk answers it before any of pml's steps), and
// pml audit --outcome denied shows exactly the denied ones.
func TestPMLAuditShowsEveryCallAndExactlyTheDeniedOnes(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:read_file"], "deny": ["shell:*"], "ask": ["filesystem:write_file"]}}`)
	ws.write("a.txt", "a")
	s := startSession(t, ws)

	// Before any call: an empty array, and a note on stderr.
	if code, out, errOut := runPML(t, ws, "audit", "--format", "json"); code != 0 || strings.TrimSpace(out) != "[]" || !strings.Contains(errOut, "no tool call has been made") {
		t.Errorf("an empty workspace: exit %d, %q, %q", code, out, errOut)
	}

	s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
	s.call(t, "shell:exec", map[string]any{"command": "true"})
	s.call(t, "filesystem:write_file", map[string]any{"path": "a.txt", "content": "secret-content"})
	s.call(t, "shell:exec", map[string]any{"command": "echo secret-command"})
	_, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "nosuch:tool", Arguments: map[string]any{"token": "secret-token"}})
	if err == nil || !strings.Contains(err.Error(), `unknown tool "nosuch:tool"`) {
		t.Fatalf("unknown tool: %v", err)
	}

	var all []auditEntry
	waitSaw(t, "five entries", 10*time.Second, func() (bool, string) {
		all = auditJSON(t, ws)
		return len(all) == 5, ""
	})
	want := []struct{ tool, decision string }{
		{"filesystem:read_file", "allowed"}, {"shell:exec", "denied"}, {"filesystem:write_file", "asked"},
		{"shell:exec", "denied"}, {"nosuch:tool", "failed"},
	}
	for i, w := range want {
		if all[i].Tool != w.tool || all[i].Decision != w.decision {
			t.Errorf("entry %d: %+v, want %s %s", i, all[i], w.tool, w.decision)
		}
	}
	if u := all[4]; u.Reason != "no such tool" || len(u.ArgKeys) != 1 || u.ArgKeys[0] != "token" {
		t.Errorf("the unknown tool's entry: %+v", u)
	}

	denied := auditJSON(t, ws, "--outcome", "denied")
	if len(denied) != 2 {
		t.Fatalf("--outcome denied: %d entries, want 2: %+v", len(denied), denied)
	}
	for _, e := range denied {
		if e.Tool != "shell:exec" || e.Decision != "denied" || e.Pattern != "shell:*" {
			t.Errorf("--outcome denied: %+v", e)
		}
	}
	if es := auditJSON(t, ws, "--tool", "filesystem__*"); len(es) != 2 {
		t.Errorf("--tool filesystem__*: %+v", es)
	}
	if es := auditJSON(t, ws, "--since", "1h", "--outcome", "asked"); len(es) != 1 || es[0].Tool != "filesystem:write_file" {
		t.Errorf("--since 1h --outcome asked: %+v", es)
	}
	if es := auditJSON(t, ws, "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)); len(es) != 0 {
		t.Errorf("--since an hour ahead: %+v", es)
	}

	// The table, for people; never an argument's value.
	code, out, _ := runPML(t, ws, "audit")
	if code != 0 || !strings.Contains(out, "OUTCOME") || !strings.Contains(out, "nosuch:tool") || strings.Count(out, "denied") != 2 {
		t.Errorf("table: exit %d\n%s", code, out)
	}
	if strings.Contains(out, "secret") {
		t.Errorf("an argument's value in pml audit:\n%s", out)
	}

	// Bad input: a clear usage error.
	for _, args := range [][]string{{"--outcome", "refused"}, {"--since", "yesterday"}, {"--format", "yaml"}, {"--tool", "["}} {
		code, _, errOut := runPML(t, ws, append([]string{"audit"}, args...)...)
		if code != 2 || !strings.Contains(errOut, "pml audit --help") {
			t.Errorf("pml audit %v: exit %d, %q", args, code, errOut)
		}
	}
}

// pml audit -f prints entries as calls are made.
func TestPMLAuditFollowPrintsNewEntries(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"deny": ["shell:*"]}}`)
	s := startSession(t, ws)
	cmd := execPML(ws, "audit", "-f", "--format", "json", "--outcome", "denied")
	cmd.Dir = ws.Dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	s.call(t, "shell:exec", map[string]any{"command": "true"})
	select {
	case l := <-lines:
		var e auditEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Tool != "shell:exec" || e.Decision != "denied" {
			t.Errorf("pml audit -f printed %q (%v)", l, err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("pml audit -f printed nothing for a denied call")
	}
	// Interrupted, it ends cleanly.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("pml audit -f after SIGINT: %v", err)
	}
}
