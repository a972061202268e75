package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The file kept open between entries is used only while the path still
// names it: a link put in its place after the first entry is refused as
// on the first write, and a rotated log is started anew.
func TestAKeptFileIsDroppedWhenThePathChanges(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	victim := filepath.Join(base, "bashrc")
	path := filepath.Join(ws, ".pml", "audit.jsonl")
	if err := os.MkdirAll(filepath.Join(ws, ".pml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, []byte("orig\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := New(path)
	t.Cleanup(func() { _ = l.Close() })
	if err := l.Record(Entry{Tool: "a:one", Decision: Allowed}); err != nil {
		t.Fatal(err)
	}
	// A rotation: the next entry starts a new file at the path.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Record(Entry{Tool: "a:two", Decision: Allowed}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "a:two") || strings.Contains(string(b), "a:one") {
		t.Errorf("after a rotation the log holds %q", b)
	}
	if b, _ := os.ReadFile(path + ".1"); strings.Contains(string(b), "a:two") {
		t.Errorf("an entry went to the rotated file: %q", b)
	}
	// A link in its place: refused, the target untouched.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	if err := l.Record(Entry{Tool: "a:three", Decision: Allowed}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("want a refusal naming the link, got %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "orig\n" {
		t.Errorf("the link's target was written: %q", b)
	}
}
