package projects

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTheRecordKeepsProjectsAndWhatPmlPulledForThem(t *testing.T) {
	state := t.TempDir()
	s, err := Open(func(k string) string {
		if k == "XDG_STATE_HOME" {
			return state
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Path != filepath.Join(state, "pml", FileName) {
		t.Fatalf("path = %s", s.Path)
	}
	if err := s.Served("/src/a"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddPulled("/src/b", map[string]string{"sha256:1": "r.io/x:1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddPulled("/src/a", map[string]string{"sha256:1": "r.io/x@sha256:d"}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Projects) != 2 || rec.Projects["/src/a"] == nil || rec.Projects["/src/b"] == nil {
		t.Errorf("projects = %v", rec.Projects)
	}
	p := rec.Pulled["sha256:1"]
	if p == nil || strings.Join(p.Refs, ",") != "r.io/x:1,r.io/x@sha256:d" || strings.Join(p.Projects, ",") != "/src/a,/src/b" {
		t.Errorf("pulled = %+v", p)
	}
	if err := s.Forget([]string{"sha256:1"}); err != nil {
		t.Fatal(err)
	}
	if rec, _ := s.Read(); len(rec.Pulled) != 0 || len(rec.Projects) != 2 {
		t.Errorf("after forget: %+v", rec)
	}
	if fi, err := os.Stat(s.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode: %v %v", fi, err)
	}
}

func TestACorruptRecordIsAnErrorThatSaysWhatToDo(t *testing.T) {
	s := &Store{Path: filepath.Join(t.TempDir(), FileName)}
	if err := os.WriteFile(s.Path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(); err == nil || !strings.Contains(err.Error(), "move it aside") {
		t.Errorf("err = %v", err)
	}
	if err := s.Served("/src/a"); err == nil {
		t.Error("a corrupt record was overwritten")
	}
}

func TestWithoutAHomeThereIsNoRecord(t *testing.T) {
	if _, err := Open(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "XDG_STATE_HOME") {
		t.Errorf("err = %v", err)
	}
}
