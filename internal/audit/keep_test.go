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

// Between two entries, each way the names leading to the log can come
// to name another file: the next entry goes to the file the path names
// now, checked as on the first write (a link refused, its target
// untouched), never to the file kept open nor through a link. The kept
// file is trusted only while the watch on the path saw nothing.
func TestAKeptFileIsDroppedWhenADirectoryOfThePathChanges(t *testing.T) {
	for _, c := range []struct {
		name string
		swap func(t *testing.T, base, ws, victimDir string)
		want string // "" (written to the path), or the refusal's words
	}{
		{".pml replaced by a link to a directory with a log", func(t *testing.T, base, ws, victimDir string) {
			mustRename(t, filepath.Join(ws, ".pml"), filepath.Join(ws, ".pml.old"))
			mustSymlink(t, victimDir, filepath.Join(ws, ".pml"))
		}, "symbolic link"},
		{"the log replaced by a link", func(t *testing.T, base, ws, victimDir string) {
			mustRename(t, filepath.Join(ws, ".pml", "audit.jsonl"), filepath.Join(ws, ".pml", "old.jsonl"))
			mustSymlink(t, filepath.Join(victimDir, "audit.jsonl"), filepath.Join(ws, ".pml", "audit.jsonl"))
		}, "symbolic link"},
		{".pml replaced by another directory", func(t *testing.T, base, ws, victimDir string) {
			mustRename(t, filepath.Join(ws, ".pml"), filepath.Join(ws, ".pml.old"))
			if err := os.Mkdir(filepath.Join(ws, ".pml"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"the workspace moved and another made in its place", func(t *testing.T, base, ws, victimDir string) {
			mustRename(t, ws, ws+".moved")
			if err := os.MkdirAll(filepath.Join(ws, ".pml"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"a directory above the workspace moved and another made in its place", func(t *testing.T, base, ws, victimDir string) {
			up := filepath.Dir(ws)
			mustRename(t, up, up+".moved")
			if err := os.MkdirAll(filepath.Join(ws, ".pml"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			ws := filepath.Join(base, "up", "ws")
			victimDir := filepath.Join(base, "outside")
			for _, d := range []string{filepath.Join(ws, ".pml"), victimDir} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			victim := filepath.Join(victimDir, "audit.jsonl")
			if err := os.WriteFile(victim, []byte("orig\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(ws, ".pml", "audit.jsonl")
			l := New(path)
			t.Cleanup(func() { _ = l.Close() })
			for _, tool := range []string{"a:one", "a:two"} {
				if err := l.Record(Entry{Tool: tool, Decision: Allowed}); err != nil {
					t.Fatal(err)
				}
			}
			c.swap(t, base, ws, victimDir)
			tk, err := l.Ready()
			if err == nil {
				err = tk.Record(Entry{Tool: "a:three", Decision: Allowed})
			}
			if b, _ := os.ReadFile(victim); string(b) != "orig\n" {
				t.Errorf("the file behind the link was written: %q", b)
			}
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("want a refusal naming the %s, got %v", c.want, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(path); !strings.Contains(string(b), "a:three") || strings.Contains(string(b), "a:one") {
				t.Errorf("the entry after the change is not alone in the file the path names now: %q", b)
			}
		})
	}
}

// Nothing changed: the kept file is used without a look at the path
// (the watch is armed), and every entry is in it.
func TestAKeptFileIsUsedWhileNothingChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".pml", "audit.jsonl")
	l := New(path)
	t.Cleanup(func() { _ = l.Close() })
	for i := 0; i < 50; i++ {
		tk, err := l.Ready()
		if err != nil {
			t.Fatal(err)
		}
		if err := tk.Record(Entry{Tool: "a:one", Decision: Allowed}); err != nil {
			t.Fatal(err)
		}
		// Other files of .pml and of the workspace come and go.
		if err := os.WriteFile(filepath.Join(filepath.Dir(path), "tools-cache.json"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if !l.armed && !l.noWatch {
		t.Error("the log checks its path on every entry although it watches it")
	}
	if b, _ := os.ReadFile(path); strings.Count(string(b), "\n") != 50 {
		t.Errorf("want 50 entries, got %q", b)
	}
}

func mustRename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, at string) {
	t.Helper()
	if err := os.Symlink(target, at); err != nil {
		t.Fatal(err)
	}
}

// Two logs of one process, one workspace inside the other (they share
// the process's inotify instance, and watches): a swap in either is seen
// by that log, and the other goes on writing its own file.
func TestLogsOfOneProcessEachSeeTheirOwnPath(t *testing.T) {
	base := t.TempDir()
	outer := filepath.Join(base, "ws")
	inner := filepath.Join(outer, "sub")
	victim := filepath.Join(base, "bashrc")
	if err := os.WriteFile(victim, []byte("orig\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	lo, li := New(filepath.Join(outer, ".pml", "audit.jsonl")), New(filepath.Join(inner, ".pml", "audit.jsonl"))
	t.Cleanup(func() { _ = lo.Close(); _ = li.Close() })
	rec := func(l *Log, tool string) error { return l.Record(Entry{Tool: tool, Decision: Allowed}) }
	for _, l := range []*Log{lo, li} {
		if err := rec(l, "a:one"); err != nil {
			t.Fatal(err)
		}
	}
	// The inner log becomes a link: the inner refuses, the outer writes.
	mustRename(t, li.Path(), li.Path()+".old")
	mustSymlink(t, victim, li.Path())
	if err := rec(lo, "a:outer"); err != nil {
		t.Errorf("the outer log after the inner one's swap: %v", err)
	}
	if err := rec(li, "a:inner"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("the inner log after its swap: %v", err)
	}
	// The outer .pml/ becomes a link: the outer refuses.
	mustRename(t, filepath.Join(outer, ".pml"), filepath.Join(outer, ".pml.old"))
	mustSymlink(t, base, filepath.Join(outer, ".pml"))
	if err := rec(lo, "a:outer2"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("the outer log after its .pml/ became a link: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "orig\n" {
		t.Errorf("the file behind a link was written: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(outer, ".pml.old", "audit.jsonl")); !strings.Contains(string(b), "a:outer") || strings.Contains(string(b), "a:outer2") {
		t.Errorf("the outer log holds %q", b)
	}
}
