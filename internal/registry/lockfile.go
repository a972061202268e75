package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/toolglob"
	"github.com/pml-dev/pml/internal/vouch"
)

// LockfilePath is the workspace's lockfile.
func LockfilePath(workspace string) string {
	return filepath.Join(workspace, ".pml", "mcp.lock")
}

// LockfileVersion is the format version pml reads and writes.
const LockfileVersion = 1

// LockEntry is what the lockfile records for one entry.
type LockEntry struct {
	// FQDN is the 5-part name of the version recorded.
	FQDN string `json:"fqdn"`
	// Version is the semantic version the FQDN was resolved from (pml add
	// NAME@^1.2 pins the version chosen), when the registry gave one.
	Version   string `json:"version,omitempty"`
	Integrity string `json:"integrity"`
	// CodeIntegrity is the integrity of a deno entry's code fetched from
	// its codeUrl (the seeds' two steps), recorded at its first fetch.
	CodeIntegrity string    `json:"codeIntegrity,omitempty"`
	FetchedAt     time.Time `json:"fetchedAt"`
	Type          string    `json:"type"`
	Routing       string    `json:"routing"`
	// Vouch is the user's MAC over the entry (internal/vouch), written
	// by save: an entry without a valid one (a repository's lockfile, an
	// older pml's) pins nothing and is treated as absent, so the entry is
	// fetched and pinned again.
	Vouch string `json:"vouch,omitempty"`
}

// payload is what an entry's vouch covers: the entry without it.
func (e LockEntry) payload() []byte {
	e.Vouch = ""
	b, _ := json.Marshal(e)
	return b
}

// lockDoc is the file: seed 004's format, with entries keyed by the 4-part
// name. The seed's example keys by the 5-part name, but its AC14 compares
// versions of one 4-part name ("pml.mcp.tavily.server", old hash d7e8, new
// f9a0): keyed by the 5-part name, a changed entry would get a new key and
// the change would never be seen. Each entry keeps its 5-part name in
// "fqdn". Files written with 5-part keys are read and rewritten.
//
//	{"version": 1, "entries": {"pml.mcp.tavily.server": {"fqdn": "pml.mcp.tavily.server.d7e8",
//	  "integrity": "sha256-…", "fetchedAt": "2026-01-07T12:00:00Z", "type": "http", "routing": "server"}}}
type lockDoc struct {
	Version int                  `json:"version"`
	Entries map[string]LockEntry `json:"entries"`
}

// Lockfile is the workspace's record of the integrity of every entry it
// fetched. It is safe for concurrent use within one process; every change
// is written at once, atomically (temporary file, then rename). Two pml
// processes in one workspace each write their own view, so the later write
// wins: the worst outcome is an entry recorded again or asked about again,
// never one accepted without a check.
type Lockfile struct {
	path string
	// ws is the workspace the entries' vouches are of (the lockfile's
	// own, but for pml doctor's copy of it).
	ws      string
	mu      sync.Mutex
	entries map[string]LockEntry
	removed []string
	// unvouched are the 4-part names whose entries in the file pml did
	// not write here (Unvouched).
	unvouched []string
}

// LoadLockfile reads the lockfile at path (a missing file is an empty
// lockfile) and removes the entries that permissions no longer cover,
// saving the file when it removed any. An entry org.project.ns.action is
// kept when a pattern of perms.Allow or perms.Ask, cut at its first ':',
// glob-matches ns: "tavily:*", "tavily:search" and "*" keep every tavily
// entry; deny patterns are not consulted (a denied tool never runs, and
// keeping its record costs nothing). A corrupt file is an error naming it;
// it is never reset silently.
func LoadLockfile(file string, perms config.Permissions) (*Lockfile, error) {
	return LoadLockfileOf(lockRoot(file), file, perms)
}

// LoadLockfileOf is LoadLockfile of a copy at file of workspace ws's
// lockfile (pml doctor reads a copy, so that nothing is removed): its
// entries' vouches are checked as ws's.
func LoadLockfileOf(ws, file string, perms config.Permissions) (*Lockfile, error) {
	keep := append(append([]string{}, perms.Allow...), perms.Ask...)
	return loadLockfile(ws, file, func(ns string) bool { return covered(ns, keep) })
}

// LoadLockfileKeeping is LoadLockfile with the rule given as keep: an
// entry of namespace ns stays when keep(ns). The broker keeps everything
// not denied: a tool no pattern names is asked, so it is still "in ask".
func LoadLockfileKeeping(file string, keep func(namespace string) bool) (*Lockfile, error) {
	return loadLockfile(lockRoot(file), file, keep)
}

func loadLockfile(ws, file string, keep func(namespace string) bool) (*Lockfile, error) {
	l := &Lockfile{path: file, ws: ws, entries: map[string]LockEntry{}}
	// The lockfile is <workspace>/.pml/mcp.lock: never read through a link
	// or from a FIFO (internal/safefs).
	data, err := safefs.ReadFile(lockRoot(file), file, safefs.MaxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the lockfile %s: %w", file, err)
	}
	corrupt := func(problem string) error {
		return fmt.Errorf("the lockfile %s is not valid: %s; fix it, or delete it to record every entry again on its next fetch (pml never resets it by itself)", file, problem)
	}
	var doc lockDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, corrupt(err.Error())
	}
	if doc.Version != LockfileVersion {
		return nil, corrupt(fmt.Sprintf("its version is %d; this pml reads version %d", doc.Version, LockfileVersion))
	}
	migrated := false
	for key, e := range doc.Entries {
		f, err := ParseFQDN(key)
		if err != nil {
			return nil, corrupt(fmt.Sprintf("entry %q: %v", key, err))
		}
		if f.Hash != "" && e.FQDN == "" {
			// The seed's own keys (5-part): keep the newest per name.
			e.FQDN = key
		}
		if e.FQDN == "" {
			return nil, corrupt(fmt.Sprintf("entry %q has no \"fqdn\"", key))
		}
		ef, err := ParseFQDN(e.FQDN)
		if err != nil || ef.Hash == "" || ef.Base() != f.Base() {
			return nil, corrupt(fmt.Sprintf("entry %q: \"fqdn\" %q is not a version of %s", key, e.FQDN, f.Base()))
		}
		if _, err := HashOf(e.Integrity); err != nil {
			return nil, corrupt(fmt.Sprintf("entry %q: %v", key, err))
		}
		if e.FetchedAt.IsZero() {
			return nil, corrupt(fmt.Sprintf("entry %q has no \"fetchedAt\"", key))
		}
		if !vouch.Check(ws, vouch.Lock, f.Base(), e.payload(), e.Vouch) {
			// Not pml's pin: as if absent; the next fetch pins again.
			l.unvouched = append(l.unvouched, f.Base())
			continue
		}
		if f.Hash != "" {
			migrated = true
		}
		if old, ok := l.entries[f.Base()]; !ok || e.FetchedAt.After(old.FetchedAt) {
			l.entries[f.Base()] = e
		}
	}
	sort.Strings(l.unvouched)
	for name := range l.entries {
		f, _ := ParseFQDN(name)
		if !keep(f.Namespace) {
			delete(l.entries, name)
			l.removed = append(l.removed, name)
		}
	}
	sort.Strings(l.removed)
	if len(l.removed) > 0 || migrated {
		if err := l.save(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// covered reports whether a permission pattern can match a tool of
// namespace ns. A pattern is read in pml's form first ("tavily__search"
// and "mcp__pml__tavily__*" cover tavily, as they do in permissions),
// and namespaces compare in lower case, as permissions do.
func covered(ns string, patterns []string) bool {
	for _, p := range patterns {
		pns, _, _ := strings.Cut(toolglob.Normalize(p), ":")
		if ok, err := path.Match(pns, strings.ToLower(ns)); err == nil && ok {
			return true
		}
	}
	return false
}

// Removed lists the 4-part names LoadLockfile removed because permissions
// no longer cover them.
func (l *Lockfile) Removed() []string { return append([]string(nil), l.removed...) }

// Unvouched lists the 4-part names whose entries in the file carry no
// valid vouch of this user's pml in this workspace: they were left out, as
// if absent.
func (l *Lockfile) Unvouched() []string { return append([]string(nil), l.unvouched...) }

// UnvouchedNote is the one line said of Unvouched (empty when none).
func (l *Lockfile) UnvouchedNote() string {
	if len(l.unvouched) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: the entries of %s were not pinned by this user's pml in this workspace (a repository's lockfile, or an older pml's): they pin nothing and are fetched and pinned again on first use (pml add NAME does it now)",
		l.path, strings.Join(l.unvouched, ", "))
}

// Path is the lockfile's path.
func (l *Lockfile) Path() string { return l.path }

// Entries returns a copy of every record, by 4-part name.
func (l *Lockfile) Entries() map[string]LockEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]LockEntry, len(l.entries))
	for k, v := range l.entries {
		out[k] = v
	}
	return out
}

// Get returns the record for a name (4 or 5 parts; the hash is ignored).
func (l *Lockfile) Get(name string) (LockEntry, bool) {
	f, err := ParseFQDN(name)
	if err != nil {
		return LockEntry{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[f.Base()]
	return e, ok
}

// Status is the outcome of Check.
type Status string

const (
	// StatusNew: first time this name is seen; it has been recorded.
	StatusNew Status = "new"
	// StatusMatch: the recorded integrity is the entry's.
	StatusMatch Status = "match"
	// StatusMismatch: the entry changed since it was recorded; nothing was
	// written. Ask the user (an "integrity" approval), then Approve.
	StatusMismatch Status = "mismatch"
)

// Verdict is Check's answer.
type Verdict struct {
	Status Status
	// Name is the 4-part name.
	Name string
	// Old is the recorded entry (zero for StatusNew); New is the fetched one.
	Old, New LockEntry
}

// Description is the sentence an integrity approval shows the user.
func (v Verdict) Description() string {
	if v.Status != StatusMismatch {
		return ""
	}
	oh, _ := HashOf(v.Old.Integrity)
	nh, _ := HashOf(v.New.Integrity)
	if oh == nh && v.Old.CodeIntegrity != v.New.CodeIntegrity {
		return fmt.Sprintf("The code of %s changed: its codeUrl served code with integrity %s, recorded %s; now %s (fetched %s). This could indicate a legitimate update or potential MITM attack.",
			v.Name, v.Old.CodeIntegrity, v.Old.FetchedAt.UTC().Format(time.RFC3339), v.New.CodeIntegrity, v.New.FetchedAt.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("Hash changed for %s. Old: %s (recorded %s), New: %s (fetched %s from the registry). This could indicate a legitimate update or potential MITM attack.",
		v.Name, oh, v.Old.FetchedAt.UTC().Format(time.RFC3339), nh, v.New.FetchedAt.UTC().Format(time.RFC3339))
}

func lockEntryOf(e *Entry) (FQDN, LockEntry, error) {
	if e == nil {
		return FQDN{}, LockEntry{}, errors.New("no entry to check")
	}
	f, err := ParseFQDN(e.FQDN)
	if err != nil {
		return FQDN{}, LockEntry{}, err
	}
	if f.Hash == "" {
		return FQDN{}, LockEntry{}, fmt.Errorf("entry %s names no version", e.FQDN)
	}
	if _, err := HashOf(e.Integrity); err != nil {
		return FQDN{}, LockEntry{}, fmt.Errorf("entry %s: %v", e.FQDN, err)
	}
	at := e.FetchedAt
	if at.IsZero() {
		at = now()
	}
	return f, LockEntry{FQDN: e.FQDN, Version: e.Version, Integrity: e.Integrity, CodeIntegrity: e.CodeIntegrity, FetchedAt: at.UTC(), Type: e.Type, Routing: e.Routing}, nil
}

// Check compares a fetched entry with the lockfile. A name seen for the
// first time is recorded (and saved) and reported StatusNew; the same
// integrity is StatusMatch; a different one is StatusMismatch, with both records, and
// changes nothing.
func (l *Lockfile) Check(e *Entry) (Verdict, error) {
	f, next, err := lockEntryOf(e)
	if err != nil {
		return Verdict{}, err
	}
	name := f.Base()
	l.mu.Lock()
	defer l.mu.Unlock()
	old, ok := l.entries[name]
	switch {
	case !ok:
		l.entries[name] = next
		if err := l.save(); err != nil {
			delete(l.entries, name)
			return Verdict{}, err
		}
		return Verdict{Status: StatusNew, Name: name, New: next}, nil
	case old.Integrity == next.Integrity && (old.CodeIntegrity == "" || old.CodeIntegrity == next.CodeIntegrity):
		return Verdict{Status: StatusMatch, Name: name, Old: old, New: next}, nil
	default:
		return Verdict{Status: StatusMismatch, Name: name, Old: old, New: next}, nil
	}
}

// Approve records e as the entry's trusted version, replacing what was
// recorded: call it once the user approved an integrity change.
func (l *Lockfile) Approve(e *Entry) error {
	f, next, err := lockEntryOf(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old, had := l.entries[f.Base()]
	l.entries[f.Base()] = next
	if err := l.save(); err != nil {
		if had {
			l.entries[f.Base()] = old
		} else {
			delete(l.entries, f.Base())
		}
		return err
	}
	return nil
}

// Forget takes back the record Check made of e as new: `pml add` calls
// it when the add then fails or is refused, so that an entry nobody
// accepted is not fetched by every later session (issue 50). A record of
// another content (changed since, or approved by another process) stays.
func (l *Lockfile) Forget(e *Entry) error {
	f, next, err := lockEntryOf(e)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old, ok := l.entries[f.Base()]
	if !ok || old.Integrity != next.Integrity || old.CodeIntegrity != next.CodeIntegrity {
		return nil
	}
	delete(l.entries, f.Base())
	if err := l.save(); err != nil {
		l.entries[f.Base()] = old
		return err
	}
	return nil
}

// save writes the lockfile atomically; l.mu is held (or l is not shared
// yet).
func (l *Lockfile) save() error {
	sealed := make(map[string]LockEntry, len(l.entries))
	for name, e := range l.entries {
		sum, err := vouch.Seal(l.ws, vouch.Lock, name, e.payload())
		if err != nil {
			return fmt.Errorf("cannot write the lockfile %s: %w", l.path, err)
		}
		e.Vouch = sum
		sealed[name] = e
	}
	data, err := json.MarshalIndent(lockDoc{Version: LockfileVersion, Entries: sealed}, "", "  ")
	if err != nil {
		return err
	}
	if err := safefs.MkdirAll(lockRoot(l.path), filepath.Dir(l.path), 0o700); err != nil {
		return fmt.Errorf("cannot write the lockfile %s: %w", l.path, err)
	}
	if err := safefs.WriteFile(lockRoot(l.path), l.path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("cannot write the lockfile: %w", err)
	}
	return nil
}

// lockRoot is the workspace of a lockfile at <workspace>/.pml/mcp.lock.
func lockRoot(file string) string { return filepath.Dir(filepath.Dir(file)) }
