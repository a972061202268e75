package safefs

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestClearStaleTempsTakesOnlyAKilledWritersFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(".f.json.tmp-0123456789ab") // a killed write's
	write(".f.json.tmp-0123456789")   // not the pattern: too short
	write(".f.json.tmp-0123456789AB") // not the pattern: upper case
	write(".g.json.tmp-0123456789ab") // another file's
	write("f.json")
	if err := os.Symlink("f.json", filepath.Join(dir, ".f.json.tmp-aaaaaaaaaaaa")); err != nil {
		t.Fatal(err)
	}
	// A writer holds the lock: nothing goes.
	lock, err := OpenLock(dir, "f.json.lock", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := Lock(lock); err != nil {
		t.Fatal(err)
	}
	if gone, err := ClearStaleTemps(dir, "f.json", dir, "f.json.lock"); err != nil || len(gone) != 0 {
		t.Errorf("with the lock held elsewhere: removed %v (%v)", gone, err)
	}
	Unlock(lock)
	lock.Close()
	gone, err := ClearStaleTemps(dir, "f.json", dir, "f.json.lock")
	if err != nil || !slices.Equal(gone, []string{".f.json.tmp-0123456789ab"}) {
		t.Errorf("removed %v (%v), want the killed write's temporary only", gone, err)
	}
	for _, n := range []string{".f.json.tmp-0123456789", ".f.json.tmp-0123456789AB", ".g.json.tmp-0123456789ab", "f.json", ".f.json.tmp-aaaaaaaaaaaa"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s was removed: %v", n, err)
		}
	}
	// No temporary: no lock file is made.
	empty := t.TempDir()
	if gone, err := ClearStaleTemps(empty, "f.json", empty, ".pml/config.lock"); err != nil || gone != nil {
		t.Errorf("%v %v", gone, err)
	}
	if _, err := os.Stat(filepath.Join(empty, ".pml")); !os.IsNotExist(err) {
		t.Errorf("a lock was made with nothing to clear: %v", err)
	}
}
