//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostileCommittedGuardJournalMovesNothingAside: a repository commits
// .pml/guard/journal-*.json, the journal a pml leaves while a container
// may write the workspace, naming the person's .pml.local.json, .env and
// .mcp.json with digests they do not have and a pml process that is
// gone. Were it pml's own, the next start would move those files aside
// as a dead container's writing. The person starts pml: their files stay
// where they are, unchanged, nothing is renamed *.refused-*, and pml says
// it ignored a journal it did not write.
func TestHostileCommittedGuardJournalMovesNothingAside(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	own := map[string]string{
		".pml.local.json": `{"permissions": {"deny": ["shell:*"]}}`,
		".env":            "MY_TOKEN=person-secret\n",
		".mcp.json":       `{"mcpServers": {"pml": {"command": "pml", "args": ["stdio"]}}}`,
	}
	for name, content := range own {
		ws.write(name, content)
	}
	zero := strings.Repeat("0", 64)
	journal := `{"owner": {"pml.owner.pid": "999999", "pml.owner.start": "1", "pml.owner.host": "repo-host"},
 "since": "2026-01-01T00:00:00Z",
 "expect": {".pml.local.json": {"sha256": "` + zero + `"}, ".env": {"absent": true}, ".mcp.json": {"sha256": "` + zero + `"},
            "../outside.txt": {"absent": true}, ".pml/trust.json": {"absent": true}}}`
	ws.writeUntrusted(".pml/guard/journal-999999-1.json", journal)
	ws.writeUntrusted("../outside.txt", "beside the workspace")

	s := startSession(t, ws)
	if _, err := s.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if _, res := s.call(t, "shell:exec", map[string]any{"command": "echo ran"}); !res.IsError {
		t.Error("the person's .pml.local.json deny of shell:* did not hold after start")
	}
	_ = s.Close()
	_ = s.cmd.Wait()

	for name, content := range own {
		if b, err := os.ReadFile(ws.path(name)); err != nil || string(b) != content {
			t.Errorf("the person's %s after pml started beside a committed journal: %q, %v", name, b, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(ws.Dir), "outside.txt")); err != nil || string(b) != "beside the workspace" {
		t.Errorf("a file outside the workspace the journal named: %q, %v", b, err)
	}
	moved, _ := filepath.Glob(ws.path("*.refused-*"))
	if len(moved) > 0 {
		t.Errorf("files moved aside for a journal the repository wrote: %v", moved)
	}
	if !strings.Contains(s.stderr.String(), "a guard journal pml did not write is ignored") {
		t.Errorf("pml did not say it ignored the committed journal:\n%s", s.stderr.String())
	}
}
