package deps

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/safefs"
)

// An install fills a directory of its own beside the server's cache,
// .pml/deps/.partial-NAME-RANDOM, and renames it into place once it is
// complete and verified: a pml killed mid-install (SIGKILL, a power cut)
// leaves that directory, never a half-filled .pml/deps/NAME that a later
// run would mount.
//
// Whether a partial directory is still being filled is told by a lock,
// not by a pid: the installing process holds an flock on
// .partial-NAME-RANDOM.lock for as long as it runs, and the kernel drops
// it when the process dies, whatever its pid namespace (a pid alone is
// reused, and means nothing across namespaces). The creation of a
// partial directory and the sweep of dead ones both hold .pml/deps/.lock,
// so a sweep never sees a directory whose lock
// is not yet taken.

// partialPrefix starts the name of an install's directory under way: a
// dot name no server can have (checkServerName, config), so Names and
// cleanup's list of servers never take it for one.
const partialPrefix = ".partial-"

const lockSuffix = ".lock"

func (s *Store) root() string { return filepath.Join(s.ws, ".pml", "deps") }

// lockDeps holds .pml/deps/.lock (the directory is created), the lock of
// .pml/deps and .pml/deps.json across pml processes: held to create a
// partial directory, to finish or sweep one, and to change deps.json.
// Never held while another is: no nesting, no deadlock.
func (s *Store) lockDeps() (func(), error) {
	if err := safefs.MkdirAll(s.ws, s.root(), 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", s.root(), err)
	}
	f, err := safefs.OpenLock(s.ws, filepath.Join(s.root(), ".lock"), 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot lock %s: %w", s.root(), err)
	}
	if err := safefs.Lock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot lock %s: %w", s.root(), err)
	}
	return func() { safefs.Unlock(f); f.Close() }, nil
}

// beginPartial creates the directory an install of server name fills,
// with its lock held until finish, which removes whatever is left of the
// directory (nothing once it was renamed into place) and its lock file.
func (s *Store) beginPartial(name string) (dir string, finish func(), err error) {
	unlock, err := s.lockDeps()
	if err != nil {
		return "", nil, err
	}
	defer unlock()
	var b [6]byte
	_, _ = rand.Read(b[:])
	dir = filepath.Join(s.root(), partialPrefix+name+"-"+hex.EncodeToString(b[:]))
	lock, err := safefs.OpenLock(s.ws, dir+lockSuffix, 0o600)
	if err != nil {
		return "", nil, fmt.Errorf("creating %s: %w", dir+lockSuffix, err)
	}
	if err := safefs.Lock(lock); err != nil {
		lock.Close()
		return "", nil, fmt.Errorf("locking %s: %w", dir+lockSuffix, err)
	}
	finish = func() {
		// Under the sweep's lock: a sweep sees the directory and its
		// held lock, or neither.
		if unlock, err := s.lockDeps(); err == nil {
			defer unlock()
		}
		_ = safefs.RemoveAll(s.ws, dir)
		_ = safefs.Remove(s.ws, dir+lockSuffix)
		safefs.Unlock(lock)
		lock.Close()
	}
	if err := safefs.MkdirAll(s.ws, dir, 0o755); err != nil {
		finish()
		return "", nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	return dir, finish, nil
}

// Interrupted is what an install a kill interrupted left in .pml/deps.
type Interrupted struct {
	// Path is the partial directory (or, when only that is left, its
	// lock file), absolute.
	Path string
}

// ClearInterrupted finds the partial directories of installs whose
// process is gone (their lock is free) and, unless dryRun, deletes them
// with their lock files. Before anything is deleted, beforeRemove runs
// (when set): the caller removes the containers of pml processes that
// died there, so that a killed pml's install container, which outlives
// it, is not still writing into what is deleted. A partial directory a
// running install fills (another pml add, now) is never touched.
func (s *Store) ClearInterrupted(dryRun bool, beforeRemove func()) ([]Interrupted, error) {
	entries, err := os.ReadDir(s.root())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !hasPartial(entries) {
		return nil, nil
	}
	unlock, err := s.lockDeps()
	if err != nil {
		return nil, err
	}
	defer unlock()
	entries, err = os.ReadDir(s.root())
	if err != nil {
		return nil, err
	}
	bases := map[string]bool{}
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, partialPrefix) {
			bases[strings.TrimSuffix(n, lockSuffix)] = true
		}
	}
	// A killed pml add's mark (adding.go) holds nothing: it goes without
	// a word, unless its add still runs.
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, addingPrefix) && strings.HasSuffix(n, lockSuffix) {
			p := filepath.Join(s.root(), n)
			if f, err := safefs.Open(s.ws, p); err == nil {
				if ok, err := safefs.TryLock(f); err == nil && ok && !dryRun {
					_ = safefs.Remove(s.ws, p)
				}
				f.Close()
			}
		}
	}
	var dead []Interrupted
	var held []*os.File
	defer func() {
		for _, f := range held {
			safefs.Unlock(f)
			f.Close()
		}
	}()
	for base := range bases {
		dir := filepath.Join(s.root(), base)
		lock, err := safefs.Open(s.ws, dir+lockSuffix)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// No lock file: its install finished removing it (the
			// directory goes first), or was killed doing so.
		case err != nil:
			return nil, err
		default:
			ok, err := safefs.TryLock(lock)
			if err != nil || !ok {
				lock.Close()
				if err != nil {
					return nil, fmt.Errorf("cannot tell whether an install fills %s: %w", dir, err)
				}
				continue // a running install's
			}
			held = append(held, lock)
		}
		p := dir
		if _, err := safefs.Lstat(s.ws, dir); err != nil {
			p = dir + lockSuffix
		}
		dead = append(dead, Interrupted{Path: p})
	}
	sort.Slice(dead, func(i, j int) bool { return dead[i].Path < dead[j].Path })
	if dryRun || len(dead) == 0 {
		return dead, nil
	}
	if beforeRemove != nil {
		beforeRemove()
	}
	for _, d := range dead {
		base := strings.TrimSuffix(d.Path, lockSuffix)
		if err := safefs.RemoveAll(s.ws, base); err != nil {
			return nil, fmt.Errorf("removing %s: %w", base, err)
		}
		if err := safefs.Remove(s.ws, base+lockSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("removing %s: %w", base+lockSuffix, err)
		}
	}
	return dead, nil
}

func hasPartial(entries []os.DirEntry) bool {
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), partialPrefix) || strings.HasPrefix(e.Name(), addingPrefix) {
			return true
		}
	}
	return false
}
