package deps

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/vouch"
)

// A repository can commit .pml/deps.json and .pml/deps/NAME: a record
// saying its server is installed, beside a tree holding the repository's
// own code. Such a record must not make a trusted server run that code
// instead of being installed. So a record counts only when it carries the
// user's vouch (internal/vouch: a MAC under a key in the user's state
// directory, over the workspace, the server's name and the record, whose
// Tree is the sha256 of the tree as installed), and the tree is hashed
// again and compared with Tree before the server first starts in a
// process. An unvouched record is absent: the server is installed again,
// and a record an older pml wrote (no vouch) is made again so, once.
//
// The hash is taken once per process and record, not at every start: a
// tree changed behind a running pml is not seen until the next process.
// Nothing pml starts can write the tree (installs run into a partial
// directory; servers mount it read-only; .pml is refused to pml's tools),
// so only a process of the user's own could, and it could as well change
// pml.

// payload is what the vouch of rec covers: the record without its vouch.
func payload(rec Record) []byte {
	rec.Vouch = ""
	b, _ := json.Marshal(rec)
	return b
}

func (s *Store) seal(name string, rec Record) (Record, error) {
	sum, err := vouch.Seal(s.ws, vouch.Deps, name, payload(rec))
	if err != nil {
		return rec, err
	}
	rec.Vouch = sum
	return rec, nil
}

// Vouched reports whether rec, the record of server name, was written by
// this user's pml in this workspace; why says otherwise why not.
func (s *Store) Vouched(name string, rec Record) (ok bool, why string) {
	if vouch.Check(s.ws, vouch.Deps, name, payload(rec), rec.Vouch) {
		return true, ""
	}
	return false, vouch.Why(rec.Vouch)
}

// honoured is the record of server name when it is vouched for; called
// with s.mu held. An unvouched record is reported once (Note).
func (s *Store) honoured(st state, name string) (Record, bool) {
	rec, ok := st.Servers[name]
	if !ok {
		return rec, false
	}
	if ok, why := s.Vouched(name, rec); !ok {
		s.warn(name, fmt.Sprintf("%s: the record of its install in .pml/deps.json is not honoured: %s; the server is installed again before it runs", name, why))
		return rec, false
	}
	return rec, true
}

// treeMatches hashes .pml/deps/NAME again (once per process and record)
// and compares it with the vouched Tree; called with s.mu held.
func (s *Store) treeMatches(name string, rec Record) bool {
	if s.checked[name] == rec.Vouch {
		return true
	}
	if rec.Tree == "" {
		return false // vouched for with no tree (Revouch of a record whose tree was gone)
	}
	got, err := TreeSRI(context.Background(), s.ws, s.Dir(name), "sha256")
	if err != nil || got != rec.Tree {
		s.warn(name, fmt.Sprintf("%s: .pml/deps/%s is not the tree pml installed (its files changed since); the server is installed again before it runs", name, name))
		return false
	}
	s.checkedOK(name, rec)
	return true
}

// checkedOK remembers that rec's tree matched; called with s.mu held.
func (s *Store) checkedOK(name string, rec Record) {
	if s.checked == nil {
		s.checked = map[string]string{}
	}
	s.checked[name] = rec.Vouch
}

func (s *Store) warn(name, msg string) {
	if s.Note == nil || s.warned[name] {
		return
	}
	if s.warned == nil {
		s.warned = map[string]bool{}
	}
	s.warned[name] = true
	s.Note(msg)
}

// Revouch vouches for every record of deps.json as it is now, each with
// the hash of its tree as it is now: pml images load restored them from a
// bundle the person chose to load (images/bundle.go), which stands for them
// as the images it holds do. A record whose tree is missing is vouched for
// with none, so its server is installed again.
func (s *Store) Revouch(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := s.lockDeps()
	if err != nil {
		return err
	}
	defer unlock()
	s.forget()
	st, err := s.load()
	if err != nil {
		return err
	}
	if len(st.Servers) == 0 {
		return nil
	}
	for name, rec := range st.Servers {
		rec.Tree = ""
		if fi, err := safefs.Lstat(s.ws, s.Dir(name)); err == nil && fi.IsDir() {
			if rec.Tree, err = TreeSRI(ctx, s.ws, s.Dir(name), "sha256"); err != nil {
				return fmt.Errorf("hashing %s: %w", s.Dir(name), err)
			}
		}
		if rec, err = s.seal(name, rec); err != nil {
			return err
		}
		st.Servers[name] = rec
		delete(s.checked, name)
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	return safefs.WriteFile(s.ws, s.file(), append(b, '\n'), 0o644)
}
