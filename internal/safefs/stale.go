package safefs

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A WriteFile killed between creating its temporary file and renaming it
// leaves the temporary behind: .NAME.tmp-<12 hex digits> beside NAME
// (writeAtomic). ClearStaleTemps removes those of one file, under the
// lock its writers hold, so it never takes the file of a write in flight.

// tempsOf lists the names in dir that are WriteFile's temporaries of
// name: ".NAME.tmp-" and 12 lowercase hex digits, nothing else.
func tempsOf(dir, name string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	prefix := "." + name + ".tmp-"
	var out []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if ok && isTempSuffix(rest) && e.Type().IsRegular() {
			out = append(out, e.Name())
		}
	}
	return out
}

func isTempSuffix(s string) bool {
	if len(s) != 12 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ClearStaleTemps removes the temporaries WriteFile left for dir/name
// when it was killed mid-write, and returns the names removed. The
// writers of that file hold the lock lockName beneath lockRoot while they
// write (config.LockEdits for .pml.json, the trust store's lock for
// trust.json): the lock is tried, never waited for, and held while the
// files go, so a write in flight (its writer holds the lock) is never
// touched; and only a temporary last changed before the lock was taken
// goes (one made since belongs to a writer that came after). Nothing is
// created when no temporary is there; a link, a directory or any other
// name is never removed.
func ClearStaleTemps(dir, name, lockRoot, lockName string) ([]string, error) {
	if len(tempsOf(dir, name)) == 0 {
		return nil, nil
	}
	if err := MkdirAll(lockRoot, filepath.Dir(filepath.Join(lockRoot, lockName)), 0o700); err != nil {
		return nil, err
	}
	lock, err := OpenLock(lockRoot, lockName, 0o600)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	ok, err := TryLock(lock)
	if err != nil || !ok {
		// A writer holds it: its temporary is in flight; the next
		// command clears what is left.
		return nil, err
	}
	defer Unlock(lock)
	since := time.Now()
	var removed []string
	for _, n := range tempsOf(dir, name) {
		p := filepath.Join(dir, n)
		st, err := os.Lstat(p)
		if err != nil || !st.Mode().IsRegular() || !st.ModTime().Before(since) {
			continue
		}
		if os.Remove(p) == nil {
			removed = append(removed, n)
		}
	}
	return removed, nil
}
