package deps

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// settled makes what a test wrote old enough for the store to keep:
// settleTime is cut to 50 ms for the test, and the test waits it out.
func settled(t *testing.T) {
	t.Helper()
	was := settleTime
	settleTime = 50 * time.Millisecond
	t.Cleanup(func() { settleTime = was })
	time.Sleep(60 * time.Millisecond)
}

// linkToCopy replaces the file or directory path with a link to a copy
// of it outside the workspace: the same content, another inode.
func linkToCopy(t *testing.T, path string) {
	t.Helper()
	cp := filepath.Join(t.TempDir(), filepath.Base(path))
	fi, err := os.Lstat(path)
	if err == nil && fi.IsDir() {
		err = os.CopyFS(cp, os.DirFS(path))
	} else if err == nil {
		var b []byte
		if b, err = os.ReadFile(path); err == nil {
			err = os.WriteFile(cp, b, 0o644)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cp, path); err != nil {
		t.Fatal(err)
	}
}

// Installed keeps deps.json and the tree's place as it found them, and
// finds every later change of either, in place or by rename, link or
// removal, by a writer other than this pml.
func TestInstalledSeesEveryChangeOfWhatItKept(t *testing.T) {
	srv := vouchServer()
	type change struct {
		name string
		do   func(t *testing.T, ws string)
	}
	file := func(ws string) string { return filepath.Join(ws, ".pml", "deps.json") }
	rewrite := func(t *testing.T, ws string, edit func(rec map[string]any)) []byte {
		b, err := os.ReadFile(file(ws))
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]map[string]map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		edit(doc["servers"]["m"])
		out, _ := json.MarshalIndent(doc, "", "  ")
		return out
	}
	changes := []change{
		{"the record's spec changed in place (same inode)", func(t *testing.T, ws string) {
			b := rewrite(t, ws, func(rec map[string]any) { rec["spec"] = "another" })
			f, err := os.OpenFile(file(ws), os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Write(b); err != nil {
				t.Fatal(err)
			}
		}},
		{"the vouch dropped, by rename", func(t *testing.T, ws string) {
			b := rewrite(t, ws, func(rec map[string]any) { delete(rec, "vouch") })
			tmp := file(ws) + ".new"
			if err := os.WriteFile(tmp, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, file(ws)); err != nil {
				t.Fatal(err)
			}
		}},
		{"deps.json a link to a copy of itself", func(t *testing.T, ws string) {
			linkToCopy(t, file(ws))
		}},
		{"deps.json removed", func(t *testing.T, ws string) {
			if err := os.Remove(file(ws)); err != nil {
				t.Fatal(err)
			}
		}},
		{"the tree a link to a copy of itself", func(t *testing.T, ws string) {
			linkToCopy(t, NewStore(ws).Dir("m"))
		}},
		{"the tree removed", func(t *testing.T, ws string) {
			if err := os.RemoveAll(NewStore(ws).Dir("m")); err != nil {
				t.Fatal(err)
			}
		}},
		{".pml/deps a link to a copy of itself", func(t *testing.T, ws string) {
			linkToCopy(t, filepath.Join(ws, ".pml", "deps"))
		}},
	}
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			ws := t.TempDir()
			installTree(t, NewStore(ws), srv)
			settled(t)
			s := NewStore(ws)
			for range 3 {
				if !s.Installed(srv) {
					t.Fatal("pml's own install is not installed")
				}
			}
			if s.seen == nil || s.dirs["m"].vouch == "" {
				t.Fatal("Installed kept nothing of a settled deps.json and tree")
			}
			c.do(t, ws)
			if s.Installed(srv) {
				t.Fatal("still installed after the change")
			}
		})
	}
}

// A deps.json that changed less than settleTime before it was read is
// read again on the next ask: a change within the file system's clock
// tick would keep its stamp.
func TestInstalledKeepsNoFileJustChanged(t *testing.T) {
	srv := vouchServer()
	ws := t.TempDir()
	installTree(t, NewStore(ws), srv)
	was := settleTime
	settleTime = time.Hour
	t.Cleanup(func() { settleTime = was })
	s := NewStore(ws)
	if !s.Installed(srv) {
		t.Fatal("pml's own install is not installed")
	}
	if s.seen != nil {
		t.Fatal("a deps.json written just now was kept")
	}
}

// This pml's own writes drop what it kept, whatever the stamps say.
func TestInstalledForgetsOnItsOwnWrites(t *testing.T) {
	srv := vouchServer()
	ws := t.TempDir()
	installTree(t, NewStore(ws), srv)
	settled(t)
	s := NewStore(ws)
	if !s.Installed(srv) || s.seen == nil {
		t.Fatal("not kept")
	}
	if _, err := s.Remove("m"); err != nil {
		t.Fatal(err)
	}
	if s.seen != nil || s.dirs != nil {
		t.Fatal("Remove kept what Installed had seen")
	}
	if s.Installed(srv) {
		t.Fatal("installed after Remove")
	}
}
