//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests here are the attacker's view of .pml.local.json: its keys win
// over the team's .pml.json, so it must be neither writable by a container
// nor able to weaken a trusted setting without `pml trust`.

// elicitingPolicy requires the client's own dialog for every approval:
// the e2e client has none, so an asked tool fails closed.
const elicitingPolicy = `{"permissions": {"allow": ["shell:exec"], "ask": ["filesystem:write_file"]}, "hil": {"require_elicitation": true}}`

// failsClosed calls filesystem:write_file and reports whether it failed
// closed on hil.require_elicitation (no approval the model could relay).
func failsClosed(t *testing.T, s *session) (bool, string) {
	t.Helper()
	out, res := s.call(t, "filesystem:write_file", map[string]any{"path": "w.txt", "content": "x"})
	var a approval
	structured(t, res, &a)
	return res.IsError && !a.ApprovalRequired && a.WorkflowID == "" && strings.Contains(out, "require_elicitation"), out
}

// TestHostileContainerCannotWriteLocalPolicy: an approved shell:exec with
// the workspace writable creates .pml.local.json turning
// hil.require_elicitation off. It is moved aside when the call ends, and
// the next session still fails closed.
func TestHostileContainerCannotWriteLocalPolicy(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, elicitingPolicy)
	s := startSession(t, ws)
	out, res := s.call(t, "shell:exec", map[string]any{"command": `echo '{"hil":{"require_elicitation":false}}' > .pml.local.json; echo "local=$?"`})
	if res.IsError {
		t.Fatalf("shell:exec: %q", out)
	}
	if _, err := os.Stat(ws.path(".pml.local.json")); err == nil {
		b, _ := os.ReadFile(ws.path(".pml.local.json"))
		t.Errorf(".pml.local.json written by a container is still in place: %s", b)
	}
	if aside, _ := filepath.Glob(ws.path(".pml.local.json.refused-*")); len(aside) == 0 && !strings.Contains(out, "local=1") {
		t.Errorf("the container's .pml.local.json was neither refused nor moved aside (%q)", out)
	}
	s.Close()

	s = startSession(t, ws)
	if closed, out := failsClosed(t, s); !closed {
		t.Errorf("after a container wrote .pml.local.json, an asked tool should still fail closed on hil.require_elicitation: %q", out)
	}
}

// TestHostileLocalPolicyWeakeningNeedsTrust: a .pml.local.json the person
// (or anything outside pml) wrote that turns off the trusted
// hil.require_elicitation is a grant: until `pml trust`, calls behave as
// the trusted policy says (an asked tool fails closed), pml trust and
// pml doctor name it, and once trusted it applies.
func TestHostileLocalPolicyWeakeningNeedsTrust(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, elicitingPolicy)
	ws.writeUntrusted(".pml.local.json", `{"hil": {"require_elicitation": false}}`)

	s := startSession(t, ws)
	if closed, out := failsClosed(t, s); !closed {
		t.Errorf("an untrusted .pml.local.json turned hil.require_elicitation off: %q", out)
	} else if !strings.Contains(out, "not trusted") || !strings.Contains(out, "pml trust") {
		t.Errorf("the closed failure does not say the weakening waits for pml trust: %q", out)
	}
	if !s.logs("is not trusted", "require_elicitation") {
		t.Errorf("pml's stderr does not say the weakening is not trusted:\n%s", tail(s.stderr.String()))
	}
	s.Close()
	doctor, _ := execPML(ws, "doctor").CombinedOutput()
	if !strings.Contains(string(doctor), "is not trusted") || !strings.Contains(string(doctor), "require_elicitation") {
		t.Errorf("pml doctor does not report the untrusted weakening:\n%s", doctor)
	}
	if out, code := runTrust(t, ws); code != 3 || !strings.Contains(out, "hil.require_elicitation") {
		t.Errorf("pml trust without a terminal: exit %d, want 3 with the weakening listed:\n%s", code, out)
	}

	if out, code := runTrust(t, ws, "--yes"); code != 0 {
		t.Fatalf("pml trust --yes: exit %d\n%s", code, out)
	}
	s = startSession(t, ws)
	askFor(t, s, "filesystem:write_file", map[string]any{"path": "w.txt", "content": "x"})
}
