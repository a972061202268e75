package statefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTheStateDirectoryIsXDGStateHomeElseHome(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if d, ok := Dir(getenv); ok || d != "" {
		t.Errorf("no HOME, no XDG_STATE_HOME: %q %v", d, ok)
	}
	env["HOME"] = "relative"
	if _, ok := Dir(getenv); ok {
		t.Error("a relative HOME was taken")
	}
	env["HOME"] = "/home/p"
	if d, _ := Dir(getenv); d != filepath.Join("/home/p", ".local", "state", "pml") {
		t.Errorf("HOME: %q", d)
	}
	env["XDG_STATE_HOME"] = "/state"
	if d, _ := Dir(getenv); d != filepath.Join("/state", "pml") {
		t.Errorf("XDG_STATE_HOME: %q", d)
	}
}

type doc struct {
	N int `json:"n"`
}

func testFile(t *testing.T) File {
	return File{Path: filepath.Join(t.TempDir(), "pml", "things.json"), What: "pml's things", Plural: true, Max: 1 << 10, Fix: "move it aside"}
}

// A file not there yet reads as nothing; an update writes it 0600 and
// the next read sees it.
func TestAnUpdateIsReadBack(t *testing.T) {
	f := testFile(t)
	d := doc{N: 7}
	if err := f.Read(&d); err != nil || d.N != 7 {
		t.Fatalf("no file: %v %+v", err, d)
	}
	for range 2 {
		err := f.Update(func() (any, error) {
			var cur doc
			if err := f.Read(&cur); err != nil {
				return nil, err
			}
			cur.N++
			return cur, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var got doc
	if err := f.Read(&got); err != nil || got.N != 2 {
		t.Fatalf("after two updates: %v %+v", err, got)
	}
	if st, err := os.Stat(f.Path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode: %v %v", st.Mode(), err)
	}
	if err := f.Private(); err != nil {
		t.Errorf("pml's own file refused: %v", err)
	}
}

// A file that is not JSON says what it is, where, and what to do.
func TestAFileThatIsNotJSONSaysWhatToDo(t *testing.T) {
	f := testFile(t)
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.Path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := f.Read(&doc{})
	if err == nil || !strings.HasPrefix(err.Error(), "pml's things "+f.Path+" are not valid JSON (") || !strings.HasSuffix(err.Error(), "): move it aside") {
		t.Errorf("%v", err)
	}
	f.Plural = false
	if err := f.Read(&doc{}); err == nil || !strings.Contains(err.Error(), " is not valid JSON") {
		t.Errorf("singular: %v", err)
	}
}

// A file anyone can change is refused: its records would not be the
// person's word.
func TestAFileOthersCanWriteIsRefused(t *testing.T) {
	f := testFile(t)
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.Path, []byte("{}"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f.Path, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := f.Private(); err == nil {
		t.Error("a world-writable file was taken")
	}
}
