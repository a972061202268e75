package toolpin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed lock follows the person's pins: the first listing writes
// it, a held change or new tool does not reach it, an accepted one does,
// and a removed tool leaves it.
func TestTheCommittedLockFollowsThePins(t *testing.T) {
	ws := t.TempDir()
	s := open(t, ws)
	var errs []error
	s.OnCommitErr = func(err error) { errs = append(errs, err) }
	a, b := def("srv:a", "Add.", `{"type":"object"}`), def("srv:b", "Bee.", `{"type":"object"}`)
	if _, err := s.Check(KindTool, "srv", []Def{a, b}); err != nil {
		t.Fatal(err)
	}
	c := mustCommitted(t, ws)
	if got := c.ToolDefinitions["srv"].Tools; len(got) != 2 || got["srv:a"] != a.Digest() || got["srv:b"] != b.Digest() {
		t.Fatalf("after the first listing: %v", got)
	}
	a2, x := def("srv:a", "Add. Then leak.", `{"type":"object"}`), def("srv:x", "New.", `{"type":"object"}`)
	held, err := s.Check(KindTool, "srv", []Def{a2, b, x})
	if err != nil || len(held) != 2 {
		t.Fatalf("held %v %v", held, err)
	}
	if got := mustCommitted(t, ws).ToolDefinitions["srv"].Tools; len(got) != 2 || got["srv:a"] != a.Digest() {
		t.Fatalf("a held change reached the committed lock: %v", got)
	}
	if err := s.Accept(a2, a2.Digest()); err != nil {
		t.Fatal(err)
	}
	if got := mustCommitted(t, ws).ToolDefinitions["srv"].Tools; got["srv:a"] != a2.Digest() || got["srv:x"] != "" {
		t.Fatalf("after accepting srv:a: %v", got)
	}
	// b removed: gone from the lock.
	if _, err := s.Check(KindTool, "srv", []Def{a2}); err != nil {
		t.Fatal(err)
	}
	if got := mustCommitted(t, ws).ToolDefinitions["srv"].Tools; len(got) != 1 || got["srv:a"] != a2.Digest() {
		t.Fatalf("after srv:b was removed: %v", got)
	}
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	// pml lock writes it whole from the pins, keeping other servers.
	os.WriteFile(filepath.Join(ws, LockName), []byte(`{"version": 1, "tool_definitions": {"other": {"tools": {"other:t": "sha256:`+strings.Repeat("a", 64)+`"}}}}`), 0o644)
	if n, err := s.WriteCommitted(); err != nil || n != 1 {
		t.Fatalf("WriteCommitted: %d %v", n, err)
	}
	c = mustCommitted(t, ws)
	if c.ToolDefinitions["other"] == nil || c.ToolDefinitions["srv"].Tools["srv:a"] != a2.Digest() {
		t.Fatalf("WriteCommitted: %+v", c.ToolDefinitions)
	}
}

func mustCommitted(t *testing.T, ws string) *Committed {
	t.Helper()
	c, err := ReadCommitted(ws)
	if err != nil || c == nil {
		t.Fatalf("ReadCommitted: %v %v", c, err)
	}
	return c
}

func TestACommittedLockThatIsNotValidIsRefused(t *testing.T) {
	good := "sha256:" + strings.Repeat("a", 64)
	for name, content := range map[string]string{
		"another version":       `{"version": 2, "tool_definitions": {}}`,
		"an unknown key":        `{"version": 1, "tool_definitions": {}, "pins": {}}`,
		"under another server":  `{"version": 1, "tool_definitions": {"a": {"tools": {"b:t": "` + good + `"}}}}`,
		"a digest of no digest": `{"version": 1, "tool_definitions": {"a": {"tools": {"a:t": "sha256:zz"}}}}`,
		"not JSON":              `{`,
	} {
		ws := t.TempDir()
		os.WriteFile(filepath.Join(ws, LockName), []byte(content), 0o644)
		if _, err := ReadCommitted(ws); err == nil || !strings.Contains(err.Error(), LockName) {
			t.Errorf("%s: %v", name, err)
		}
	}
	ws := t.TempDir()
	os.Symlink(filepath.Join(t.TempDir(), "x"), filepath.Join(ws, LockName))
	if _, err := ReadCommitted(ws); err == nil {
		t.Error("a link was read")
	}
}

func TestCompareCommittedNamesChangedNewAndRemoved(t *testing.T) {
	a, b := def("srv:a", "Add.", `{}`), def("srv:b", "Bee.", `{}`)
	c := &Committed{Version: 1, ToolDefinitions: map[string]*Section{
		"srv":  {Tools: map[string]string{"srv:a": a.Digest(), "srv:gone": a.Digest()}},
		"dead": {Tools: map[string]string{"dead:t": a.Digest()}},
	}}
	a2 := def("srv:a", "Add!", `{}`)
	got := CompareCommitted(c, map[string][]Def{
		"tool/srv":   {a2, b},
		"prompt/srv": {{Kind: KindPrompt, Name: "srv:prompt:p"}}, // not compared: the lock has no prompts of srv
	})
	want := map[string]string{"srv:a": "changed", "srv:b": "new", "srv:gone": "removed", "dead:t": "removed"}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for _, d := range got {
		if want[d.Name] != d.Change {
			t.Errorf("%s: %s, want %s", d.Name, d.Change, want[d.Name])
		}
	}
	if len(CompareCommitted(c, map[string][]Def{"tool/srv": {a}, "tool/dead": {a}})) == 0 {
		t.Error("equal listings compared as drift-free although dead:t is missing")
	}
}

// On a machine whose pins are empty (a teammate's clone), the first
// listing pins what the server says (trust on first use) and writes it
// to the committed lock; a digest it replaces there is said.
func TestAFirstListingThatDiffersFromTheCommittedLockIsSaid(t *testing.T) {
	ws := t.TempDir()
	a := def("srv:a", "Add.", `{}`)
	os.WriteFile(filepath.Join(ws, LockName), []byte(`{"version": 1, "tool_definitions": {"srv": {"tools": {"srv:a": "sha256:`+strings.Repeat("a", 64)+`"}}}}`), 0o644)
	s := open(t, ws)
	var said []error
	s.OnCommitErr = func(err error) { said = append(said, err) }
	if held, err := s.Check(KindTool, "srv", []Def{a}); err != nil || len(held) != 0 {
		t.Fatal(held, err)
	}
	if len(said) != 1 || !strings.Contains(said[0].Error(), "srv:a") || !strings.Contains(said[0].Error(), "git diff .pml.lock") {
		t.Fatalf("said %v", said)
	}
	if got := mustCommitted(t, ws).ToolDefinitions["srv"].Tools["srv:a"]; got != a.Digest() {
		t.Errorf("the committed lock: %s", got)
	}
}
