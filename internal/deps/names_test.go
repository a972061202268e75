package deps

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Names lists only records Remove accepts: a deps.json naming "../x",
// "a/b", "..", "" or a dot name (pml's own) lists none of them, so pml
// cleanup --dry-run shows only what pml cleanup removes (issue 50).
func TestNamesListsOnlyWhatRemoveAccepts(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".pml", "deps", "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	rec := `{"spec": "x", "installed_at": "2026-01-01T00:00:00Z"}`
	doc := `{"servers": {"../x": ` + rec + `, "a/b": ` + rec + `, "..": ` + rec + `, "": ` + rec + `, ".partial-y": ` + rec + `, "ok": ` + rec + `}}`
	if err := os.WriteFile(filepath.Join(ws, ".pml", "deps.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewStore(ws)
	names, err := s.Names()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"dir", "ok"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("Names() = %q, want %q", names, want)
	}
	for _, n := range names {
		if _, err := s.Remove(n); err != nil {
			t.Errorf("Remove(%q), a name Names listed: %v", n, err)
		}
	}
}
