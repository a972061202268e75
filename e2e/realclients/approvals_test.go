//go:build realclients

package realclients

import (
	"os"
	"path/filepath"
	"testing"
)

// whoAnswers runs a read that pml must ask about in a project set up by
// pml init, and says what reached the model: "dialog closed" (the client
// put pml's question in its dialog, which nobody answered), "relayed"
// (the client has no dialog: the approval went to the model), or "".
func whoAnswers(t *testing.T, m *machine, dir string, read func() result) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, ".pml.json"), []byte(`{"permissions": {"allow": [], "ask": ["filesystem:read_file"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := read()
	switch {
	case m.model.sawMarker("no person answered"):
		return "dialog closed"
	case m.model.sawMarker("the client declined pml's dialog"):
		return "dialog declined"
	case m.model.sawMarker("Approval required ("):
		return "relayed"
	}
	m.model.dump(t)
	t.Logf("exit %d\n%s\n%s", r.code, r.stdout, tail(r.stderr, 3000))
	return ""
}

// What pml init says of each client's approvals is what the client does,
// run non-interactively as CI would: codex exec declines pml's dialog by
// itself (Claude Code's print mode closes it: its own test); opencode and
// gemini-cli have none, so the approval reaches the model.
func TestApprovalsReachWhomInitSays(t *testing.T) {
	t.Run("opencode", func(t *testing.T) {
		m, bin := opencodeMachine(t)
		dir, _ := m.project("asked")
		m.pmlInit(dir, "--client", "opencode")
		if got := whoAnswers(t, m, dir, func() result { return opencodeRead(m, dir, bin) }); got != "relayed" {
			t.Errorf("opencode: %q, pml init said its model answers", got)
		}
	})
	t.Run("gemini-cli", func(t *testing.T) {
		m, bin := geminiMachine(t)
		dir, _ := m.project("asked")
		geminiTrust(t, m, dir)
		m.pmlInit(dir, "--client", "gemini-cli")
		if got := whoAnswers(t, m, dir, func() result { return geminiRead(m, dir, bin) }); got != "relayed" {
			t.Errorf("gemini-cli: %q, pml init said its model answers", got)
		}
	})
	t.Run("codex", func(t *testing.T) {
		m, bin := codexMachine(t)
		dir, _ := m.project("asked")
		codexTrust(t, m, dir)
		m.pmlInit(dir, "--client", "codex")
		if got := whoAnswers(t, m, dir, func() result { return codexRead(m, dir, bin) }); got != "dialog declined" {
			t.Errorf("codex exec: %q, pml init said codex exec declines pml's dialog by itself", got)
		}
	})
}
