package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

// A failed add puts back what changed and removes what it created; the
// files pml add writes late (.pml.json) only once it said it writes
// them: until then a change there is someone else's.
func TestAddSnapshotPutsBackWhatTheAddChanged(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ws := t.TempDir()
	write := func(rel, s string) {
		t.Helper()
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(rel string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(ws, rel))
		if os.IsNotExist(err) {
			return "<absent>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	write(".pml/mcp.lock", "pinned 1.2.0")
	write(config.FileName, `{"permissions": {"allow": ["filesystem:*"]}}`)
	g := &globals{logFormat: "json", logLevel: "error"}
	s, err := addSnapshotFor(g, ws, "smartSearch@~1.1.0")
	if err != nil {
		t.Fatal(err)
	}
	write(".pml/mcp.lock", "pinned 1.1.0")
	write(".pml/registry-cache/pml.mcp.smartsearch.server.json", "1.1.0's copy")
	write(config.FileName, `{"permissions": {"allow": ["filesystem:*", "x:*"]}}`)
	if err := s.restore(g, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got := read(".pml/mcp.lock"); got != "pinned 1.2.0" {
		t.Errorf("the lockfile: %q, want it put back", got)
	}
	if got := read(".pml/registry-cache/pml.mcp.smartsearch.server.json"); got != "<absent>" {
		t.Errorf("the cache file the add created: %q, want it removed", got)
	}
	if got := read(config.FileName); got != `{"permissions": {"allow": ["filesystem:*", "x:*"]}}` {
		t.Errorf(".pml.json, which the add did not write: %q, want it left alone", got)
	}
	s.writing(filepath.Join(ws, config.FileName))
	if err := s.restore(g, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got := read(config.FileName); got != `{"permissions": {"allow": ["filesystem:*"]}}` {
		t.Errorf(".pml.json once the add wrote it: %q, want it put back", got)
	}
}
