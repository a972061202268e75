//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// trustWith runs pml trust in the workspace with no terminal and its own
// state directory (the trust records of this test alone).
func trustWith(t *testing.T, ws *workspace, state string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(pmlBin, append([]string{"trust"}, args...)...)
	cmd.Dir = ws.Dir
	cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir, "XDG_STATE_HOME="+state)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// TestHostileTrustIsByContent: trust is of the exact bytes trusted. Another
// .pml.json at the same path that grants the same things is not "already
// trusted": pml trust shows it (nothing more granted) and waits for a
// person, and pml says the content changed. A record whose sha256 is not a
// sha256 is not honoured: the grants it lists do not apply.
func TestHostileTrustIsByContent(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	ws := newWorkspace(t, "")
	ws.writeUntrusted(".pml.json", `{"permissions": {"allow": ["shell:exec"]}}`)
	if out, code := trustWith(t, ws, state, "--yes"); code != 0 {
		t.Fatalf("pml trust --yes: exit %d\n%s", code, out)
	}

	// The same grants, other bytes.
	ws.writeUntrusted(".pml.json", `{"permissions": {"allow": ["shell:exec"]}, "hil": {"timeout": "1m"}}`)
	out, code := trustWith(t, ws, state)
	if code != 3 || strings.Contains(out, "already trusted") || !strings.Contains(out, "nothing more is granted") {
		t.Errorf("pml trust on other content with the same grants: exit %d, want 3, shown as changed with nothing more granted:\n%s", code, out)
	}
	s := startSession(t, ws, "XDG_STATE_HOME="+state)
	if !s.logs("changed since you trusted it", "pml trust") {
		t.Errorf("pml does not say the content changed since it was trusted:\n%s", tail(s.stderr.String()))
	}
	s.Close()
	if out, code := trustWith(t, ws, state, "--yes"); code != 0 {
		t.Fatalf("pml trust --yes: exit %d\n%s", code, out)
	}
	if out, code := trustWith(t, ws, state); code != 0 || !strings.Contains(out, "already trusted") {
		t.Errorf("pml trust of the content just trusted: exit %d\n%s", code, out)
	}

	// A record with a malformed sha256 trusts nothing.
	p := filepath.Join(state, "pml", "trust.json")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	rec, _ := doc["files"].(map[string]any)[ws.path(".pml.json")].(map[string]any)
	if rec == nil {
		t.Fatalf("no record for %s in %s", ws.path(".pml.json"), data)
	}
	rec["sha256"] = "x"
	data, _ = json.Marshal(doc)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s = startSession(t, ws, "XDG_STATE_HOME="+state)
	askFor(t, s, "shell:exec", map[string]any{"command": "true"})
}
