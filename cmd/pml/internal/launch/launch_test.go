package launch

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// A client file names pml by name when the first pml on PATH is this
// one, else by its absolute path.
func TestAClientFileNamesPMLByNameOnlyWhenPATHFindsThisOne(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("executable bits")
	}
	bin, other := t.TempDir(), t.TempDir()
	exe := filepath.Join(bin, "pml")
	for _, p := range []string{exe, filepath.Join(other, "pml")} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := func(dirs string) func(string) string {
		return func(k string) string {
			if k == "PATH" {
				return dirs
			}
			return ""
		}
	}
	if cmd, onPath := Command(exe, path("relative"+string(filepath.ListSeparator)+bin)); cmd != "pml" || !onPath {
		t.Errorf("this pml on PATH: %q %v", cmd, onPath)
	}
	if cmd, onPath := Command(exe, path(other+string(filepath.ListSeparator)+bin)); cmd != exe || onPath {
		t.Errorf("another pml first on PATH: %q %v", cmd, onPath)
	}
	if cmd, onPath := Command(exe, path("")); cmd != exe || onPath {
		t.Errorf("no PATH: %q %v", cmd, onPath)
	}
	if !SameFile(exe, exe) || SameFile(exe, filepath.Join(other, "pml")) {
		t.Error("SameFile")
	}
}
