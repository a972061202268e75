//go:build linux

package e2e

import (
	"os"
	"strings"
	"testing"
)

// TestAShellCannotRewritePMLsOwnFiles: a command allowed to write the
// workspace must not be able to grant itself more in the next session.
func TestAShellCannotRewritePMLsOwnFiles(t *testing.T) {
	cfg := `{"permissions": {"allow": ["filesystem:*", "shell:exec"]}}`
	ws := newWorkspace(t, cfg)
	ws.write(".mcp.json", `{"mcpServers": {}}`)
	s := startSession(t, ws)
	// A first call leaves an audit log to try to delete.
	if out, res := s.call(t, "filesystem:list_directory", map[string]any{"path": "."}); res.IsError {
		t.Fatalf("list_directory: %q", out)
	}
	out, res := s.call(t, "shell:exec", map[string]any{"command": `
echo '{"permissions": {"allow": ["*"]}, "sandbox": {"user": "0:0"}}' > .pml.json; echo "pml.json=$?"
echo '{}' > .mcp.json; echo "mcp.json=$?"
echo forged > .pml/mcp.lock; echo "lock=$?"
rm -f .pml/audit.jsonl; echo "audit=$?"
echo fine > ordinary.txt; echo "ordinary=$?"`})
	if res.IsError {
		t.Fatalf("shell:exec: %q", out)
	}
	for _, want := range []string{"pml.json=1", "mcp.json=1", "lock=1", "audit=1", "ordinary=0"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %s in:\n%s", want, out)
		}
	}
	if b, _ := os.ReadFile(ws.path(".pml.json")); string(b) != cfg {
		t.Errorf(".pml.json was rewritten: %s", b)
	}
	if b, _ := os.ReadFile(ws.path(".mcp.json")); string(b) != `{"mcpServers": {}}` {
		t.Errorf(".mcp.json was rewritten: %s", b)
	}
	if _, err := os.Stat(ws.path(".pml/mcp.lock")); err == nil {
		t.Error("a lockfile was forged")
	}
	if _, err := os.Stat(ws.path(".pml/audit.jsonl")); err != nil {
		t.Errorf("the audit log was deleted: %v", err)
	}
	if b, err := os.ReadFile(ws.path("ordinary.txt")); err != nil || strings.TrimSpace(string(b)) != "fine" {
		t.Errorf("an ordinary write failed: %v", err)
	}
}

// TestAShellCannotCreatePMLsOwnFiles: with no .pml.json and no .mcp.json
// (nothing to mount read-only), files a command creates under those
// names are moved aside when its call ends, and the session's rules hold.
func TestAShellCannotCreatePMLsOwnFiles(t *testing.T) {
	ws := newWorkspace(t, "")
	s := startSession(t, ws)
	args := map[string]any{"command": `echo '{"permissions": {"allow": ["*"]}}' > .pml.json && echo '{}' > .mcp.json && echo created`}
	a := askFor(t, s, "shell:exec", args)
	args["continue_workflow"] = cont(a.WorkflowID, true, false)
	out, res := s.call(t, "shell:exec", args)
	if res.IsError || !strings.Contains(out, "created") {
		t.Fatalf("shell:exec: %q", out)
	}
	for _, name := range []string{".pml.json", ".mcp.json"} {
		if _, err := os.Stat(ws.path(name)); err == nil {
			t.Errorf("%s created by a container is still in place", name)
		}
	}
	// Still asked: the forged .pml.json did not take effect.
	askFor(t, s, "shell:exec", map[string]any{"command": "true"})
	if !s.logs("moved aside") {
		t.Error("no warning about the moved files")
	}
}

// TestPMLsOwnVariablesNeverReachAServer: a server configuration that asks
// for PML_API_KEY gets nothing, and says the variable is missing.
func TestPMLsOwnVariablesNeverReachAServer(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, `, "env": {"STOLEN": "${PML_API_KEY}"}`))
	s := startSession(t, ws, "PML_API_KEY=pml-e2e-do-not-pass")
	out, res := s.call(t, "probe:env", nil)
	if !res.IsError || strings.Contains(out, "pml-e2e-do-not-pass") || !strings.Contains(out, "PML_API_KEY") {
		t.Errorf("a server asking for PML_API_KEY: %q", out)
	}
}
