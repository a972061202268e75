package deps

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/safefs"
)

// Names lists the servers with something installed: a directory in
// .pml/deps or a record in .pml/deps.json, sorted.
func (s *Store) Names() ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.load()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for n := range st.Servers {
		// A record Remove would refuse (a hand-edited or hostile
		// deps.json: "../x", "a/b", a dot name) is nobody's: listing it
		// made pml cleanup --dry-run show a path outside .pml/deps that
		// pml cleanup then refused (issue 50). It is left as it is.
		if listable(n) {
			seen[n] = true
		}
	}
	entries, err := os.ReadDir(filepath.Join(s.ws, ".pml", "deps"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		// Dot names are pml's own: an install under way, or one a kill
		// interrupted (ClearInterrupted), and the lock beside them.
		if !strings.HasPrefix(e.Name(), ".") {
			seen[e.Name()] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// listable reports whether name, a record of deps.json, is one Names
// lists: one Remove accepts, and not a dot name (pml's own, as in the
// directory).
func listable(name string) bool {
	return validName(name) && !strings.HasPrefix(name, ".")
}

// validName is a name Remove accepts: one path element.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && filepath.Base(name) == name
}

// Remove deletes what server name installed: its cache directory and its
// record. It reports whether there was anything; the directory is removed
// beneath the workspace without following a link.
func (s *Store) Remove(name string) (bool, error) {
	if !validName(name) {
		return false, errors.New("not a server name: " + name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := s.lockDeps()
	if err != nil {
		return false, err
	}
	defer unlock()
	s.forget()
	had := false
	if _, err := safefs.Lstat(s.ws, s.Dir(name)); err == nil {
		had = true
		if err := safefs.RemoveAll(s.ws, s.Dir(name)); err != nil {
			return had, err
		}
	}
	st, err := s.load()
	if err != nil {
		return had, err
	}
	if _, ok := st.Servers[name]; !ok {
		return had, nil
	}
	delete(st.Servers, name)
	b, _ := json.MarshalIndent(st, "", "  ")
	return true, safefs.WriteFile(s.ws, s.file(), append(b, '\n'), 0o644)
}
