package deps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

// A partial directory whose install still runs (its lock held) is left
// alone; once its process is gone (the lock free: what a kill leaves),
// the sweep deletes it and its lock file, after beforeRemove, and a dry
// run only lists it.
func TestClearInterruptedTakesOnlyWhatNoInstallHolds(t *testing.T) {
	ws := t.TempDir()
	s := NewStore(ws)
	live, finish, err := s.beginPartial("everything")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(live), ".partial-everything-") {
		t.Fatalf("partial directory %s", live)
	}
	// What a SIGKILLed install leaves: the directory, half filled, and
	// its lock file, held by no one.
	dead := filepath.Join(s.root(), ".partial-memory-0123456789ab")
	if err := os.MkdirAll(filepath.Join(dead, "node_modules", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dead+".lock", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A lock file whose directory was already removed.
	if err := os.WriteFile(filepath.Join(s.root(), ".partial-other-ffffffffffff.lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := s.ClearInterrupted(true, func() { t.Error("a dry run called beforeRemove") })
	if err != nil || len(got) != 2 || got[0].Path != dead || got[1].Path != filepath.Join(s.root(), ".partial-other-ffffffffffff.lock") {
		t.Fatalf("dry run: %v %v", got, err)
	}
	if _, err := os.Stat(dead); err != nil {
		t.Fatalf("the dry run deleted %s: %v", dead, err)
	}
	called := false
	got, err = s.ClearInterrupted(false, func() {
		called = true
		if _, err := os.Stat(dead); err != nil {
			t.Errorf("deleted before beforeRemove ran: %v", err)
		}
	})
	if err != nil || len(got) != 2 || !called {
		t.Fatalf("sweep: %v %v (beforeRemove called: %v)", got, err, called)
	}
	for _, p := range []string{dead, dead + ".lock", filepath.Join(s.root(), ".partial-other-ffffffffffff.lock")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", p, err)
		}
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("the sweep deleted a running install's directory: %v", err)
	}
	if names, err := s.Names(); err != nil || len(names) != 0 {
		t.Errorf("Names lists pml's own dot entries: %v %v", names, err)
	}
	finish()
	entries, _ := os.ReadDir(s.root())
	for _, e := range entries {
		if e.Name() != ".lock" {
			t.Errorf("finish left %s", e.Name())
		}
	}
	if got, err := s.ClearInterrupted(false, nil); err != nil || len(got) != 0 {
		t.Errorf("nothing left to clear: %v %v", got, err)
	}
}

// Two pml processes (two Stores: their mutexes are their own) recording
// installs of different servers at once keep both records.
func TestRecordsOfTwoProcessesAreBothKept(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".pml"), 0o755); err != nil {
		t.Fatal(err)
	}
	const each = 40
	done := make(chan error, 2)
	for p := range 2 {
		s := NewStore(ws)
		go func() {
			for i := range each {
				srv := config.Server{Name: fmt.Sprintf("p%d-%d", p, i), Image: "img", Install: &config.Install{Command: "npm"}}
				if err := os.MkdirAll(s.Dir(srv.Name), 0o755); err != nil {
					done <- err
					return
				}
				if _, err := s.record(context.Background(), srv, s.Dir(srv.Name), "sha512-x", "", "", nil); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	st, err := NewStore(ws).load()
	if err != nil || len(st.Servers) != 2*each {
		t.Fatalf("%d records of %d kept (%v)", len(st.Servers), 2*each, err)
	}
}

// A name being added is seen as such by other processes (other Stores)
// until released; a second add of it is refused; a killed add's mark is
// swept without a word.
func TestAddingMarksANameUntilReleased(t *testing.T) {
	ws := t.TempDir()
	s, other := NewStore(ws), NewStore(ws)
	release, err := s.HoldAdding("memory")
	if err != nil {
		t.Fatal(err)
	}
	if !other.Adding("memory") || other.Adding("everything") {
		t.Fatal("Adding does not see the mark")
	}
	if _, err := other.HoldAdding("memory"); !errors.Is(err, ErrAdding) {
		t.Fatalf("a second add of the name: %v", err)
	}
	if got, err := other.ClearInterrupted(false, nil); err != nil || len(got) != 0 || !other.Adding("memory") {
		t.Fatalf("the sweep touched a running add's mark: %v %v", got, err)
	}
	release()
	if other.Adding("memory") {
		t.Fatal("still marked after release")
	}
	if _, err := os.Stat(s.addingLock("memory")); !os.IsNotExist(err) {
		t.Fatalf("release left its lock file (%v)", err)
	}
	// What a killed add leaves: the file, held by no one.
	if err := os.WriteFile(s.addingLock("fetch"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if other.Adding("fetch") {
		t.Fatal("a dead add's mark counts as adding")
	}
	if got, err := other.ClearInterrupted(false, func() { t.Error("reaped for a mark that holds nothing") }); err != nil || len(got) != 0 {
		t.Fatalf("sweep: %v %v", got, err)
	}
	if _, err := os.Stat(s.addingLock("fetch")); !os.IsNotExist(err) {
		t.Fatalf("the sweep left a dead add's mark (%v)", err)
	}
}
