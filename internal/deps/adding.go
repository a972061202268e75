package deps

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/pml-dev/pml/internal/safefs"
)

// pml add installs a server before .pml.json names it (all or nothing):
// meanwhile its .pml/deps/NAME is in no configuration, and pml cleanup
// would take it for a leftover. The add holds .pml/deps/.adding-NAME.lock
// from before its install until its entry is written; cleanup leaves a
// name whose lock is held alone, and a second pml add of the same name
// is refused while the first runs. A killed add's lock file holds
// nothing and is swept with the partial installs (ClearInterrupted).

const addingPrefix = ".adding-"

func (s *Store) addingLock(name string) string {
	return filepath.Join(s.root(), addingPrefix+name+lockSuffix)
}

// ErrAdding is the refusal of a second pml add of a name one is adding.
var ErrAdding = errors.New("another pml add of this name is running in this workspace")

// HoldAdding marks server name as being added until release is called.
// ErrAdding: another process is adding it now.
func (s *Store) HoldAdding(name string) (release func(), err error) {
	unlock, err := s.lockDeps()
	if err != nil {
		return nil, err
	}
	defer unlock()
	p := s.addingLock(name)
	f, err := safefs.OpenLock(s.ws, p, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", p, err)
	}
	ok, err := safefs.TryLock(f)
	if err != nil || !ok {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%w (%s is held): wait for it, or stop it", ErrAdding, p)
		}
		return nil, err
	}
	return func() {
		// Under the lock of .pml/deps, as the sweep: the file goes while
		// its lock is held, so no one holds a lock on a removed file.
		if unlock, err := s.lockDeps(); err == nil {
			defer unlock()
		}
		_ = safefs.Remove(s.ws, p)
		safefs.Unlock(f)
		f.Close()
	}, nil
}

// Adding reports whether a running pml add holds server name.
func (s *Store) Adding(name string) bool {
	f, err := safefs.Open(s.ws, s.addingLock(name))
	if errors.Is(err, fs.ErrNotExist) || err != nil {
		return false
	}
	defer f.Close()
	ok, err := safefs.TryLock(f)
	if err == nil && ok {
		safefs.Unlock(f)
	}
	return err == nil && !ok
}
