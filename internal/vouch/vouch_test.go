package vouch

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func stateDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	t.Setenv("XDG_STATE_HOME", d)
	return filepath.Join(d, "pml")
}

// A record vouches only for itself, of its kind and name, in its
// workspace; no MAC at all, or another user's, vouches for nothing.
func TestSealBindsWorkspaceKindNameAndRecord(t *testing.T) {
	stateDir(t)
	sum, err := Seal("/w", Deps, "memory", []byte(`{"a":1}`))
	if err != nil || !strings.HasPrefix(sum, Prefix) {
		t.Fatalf("%q %v", sum, err)
	}
	if !Check("/w", Deps, "memory", []byte(`{"a":1}`), sum) || !Check("/w/", Deps, "memory", []byte(`{"a":1}`), sum) {
		t.Fatal("pml's own record does not verify")
	}
	for _, c := range []struct{ ws, kind, name, rec, sum string }{
		{"/other", Deps, "memory", `{"a":1}`, sum},
		{"/w", Lock, "memory", `{"a":1}`, sum},
		{"/w", Deps, "memorx", `{"a":1}`, sum},
		{"/w", Deps, "memory", `{"a":2}`, sum},
		{"/w", Deps, "memory", `{"a":1}`, ""},
		{"/w", Deps, "memory", `{"a":1}`, strings.TrimPrefix(sum, Prefix)},
	} {
		if Check(c.ws, c.kind, c.name, []byte(c.rec), c.sum) {
			t.Errorf("%+v verifies", c)
		}
	}
	// Another user (another state directory, so another key).
	stateDir(t)
	if Check("/w", Deps, "memory", []byte(`{"a":1}`), sum) {
		t.Fatal("another user's key verifies the record")
	}
}

// The key is created once, 0600, whole, even by pml processes starting at
// once (here: goroutines, the cache of keys cleared for each).
func TestKeyIsCreatedOncePrivately(t *testing.T) {
	dir := stateDir(t)
	var wg sync.WaitGroup
	sums := make([]string, 8)
	for i := range sums {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := loadOrCreate(dir)
			if err != nil {
				t.Error(err)
				return
			}
			sums[i] = mac(k, "/w", Deps, "n", nil)
		}()
	}
	wg.Wait()
	for _, s := range sums[1:] {
		if s != sums[0] {
			t.Fatal("two keys were created")
		}
	}
	st, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".vouch-*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// A key others can write is not used: they could vouch for a repository.
func TestAKeyOthersCanWriteIsRefused(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root: ownership checks differ")
	}
	dir := stateDir(t)
	if _, err := loadOrCreate(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, KeyFile), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := loadOrCreate(dir); err == nil {
		t.Fatal("a world-writable key was used")
	}
}

// A damaged key says what to do.
func TestADamagedKeySaysWhatToDo(t *testing.T) {
	dir := stateDir(t)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, KeyFile), []byte("nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadOrCreate(dir); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Fatalf("%v", err)
	}
}
