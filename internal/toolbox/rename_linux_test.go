package toolbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMoveNeverReplacesADestinationThatAppeared: the destination is
// created after move_file's existence check (a racing process); the move
// fails and the destination keeps its bytes, with renameat2 and with the
// link fallback of kernels without RENAME_NOREPLACE.
func TestMoveNeverReplacesADestinationThatAppeared(t *testing.T) {
	for _, mode := range []string{"renameat2", "no RENAME_NOREPLACE"} {
		t.Run(mode, func(t *testing.T) {
			if mode != "renameat2" {
				old := renameat2
				renameat2 = func(int, string, int, string, uint) error { return unix.EINVAL }
				t.Cleanup(func() { renameat2 = old })
			}
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			must(t, os.WriteFile(src, []byte("mine"), 0o644))
			// The racer's file, created "after the check".
			must(t, os.WriteFile(dst, []byte("theirs"), 0o644))
			err := renameNoReplace(src, dst)
			if !errors.Is(err, fs.ErrExist) {
				t.Fatalf("move onto an existing destination: %v, want EEXIST", err)
			}
			if b, _ := os.ReadFile(dst); string(b) != "theirs" {
				t.Fatalf("the destination was overwritten: %q", b)
			}
			if b, _ := os.ReadFile(src); string(b) != "mine" {
				t.Fatalf("the source changed: %q", b)
			}
			// Without a destination the move works.
			must(t, os.Remove(dst))
			must(t, renameNoReplace(src, dst))
			if b, _ := os.ReadFile(dst); string(b) != "mine" {
				t.Fatalf("moved: %q", b)
			}
			if _, err := os.Lstat(src); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the source is still there: %v", err)
			}
		})
	}
}
