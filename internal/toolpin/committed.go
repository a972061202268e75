package toolpin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/safefs"
)

// LockName is the project's committed lock, at the workspace root beside
// .pml.json: .pml/ is pml's state and is not committed (pml init ignores
// it), and a CI runner starts with an empty state directory, so the
// definitions the person accepted travel with the code here.
//
// It records, per server, the digest of each tool and prompt definition
// the person's pml pinned ("tool_definitions"), in the style of
// .pml/mcp.lock (a version, then keyed sections):
//
//	{"version": 1, "tool_definitions": {"probe": {"tools": {"probe:note": "sha256:…"},
//	  "prompts": {"probe:prompt:brief": "sha256:…"}}}}
//
// It vouches for nothing: a session decides what is held only against the
// person's own pins (Store, in the state directory), never against this
// file, which a repository could have written. pml lock --check compares
// what each server lists now with it (CompareCommitted): the CI gate on
// drift since the lock was committed.
const LockName = ".pml.lock"

// CommittedVersion is the format version of LockName pml reads and writes.
const CommittedVersion = 1

// maxCommitted bounds what is read of LockName: a few hundred bytes a tool.
const maxCommitted = 16 << 20

// Section is one server's definitions in the committed lock: by kind
// ("tools", "prompts"), each name's digest.
type Section struct {
	Tools   map[string]string `json:"tools,omitempty"`
	Prompts map[string]string `json:"prompts,omitempty"`
}

func (s *Section) of(kind string) *map[string]string {
	if kind == KindPrompt {
		return &s.Prompts
	}
	return &s.Tools
}

// Committed is the committed lock's content.
type Committed struct {
	Version int `json:"version"`
	// ToolDefinitions are the digests, by server.
	ToolDefinitions map[string]*Section `json:"tool_definitions"`
}

// isDigest reports whether d is sha256:<64 lower-case hex digits>.
func isDigest(d string) bool {
	if len(d) != len("sha256:")+64 || !strings.HasPrefix(d, "sha256:") {
		return false
	}
	for _, c := range d[len("sha256:"):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ReadCommitted reads the committed lock of workspace ws: nil (and no
// error) when there is none. It is never read through a link, nor past
// its bound; one that is not valid is an error naming it and what to do.
func ReadCommitted(ws string) (*Committed, error) {
	path := filepath.Join(ws, LockName)
	data, err := safefs.ReadFile(ws, path, maxCommitted)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the committed lock %s: %w", path, err)
	}
	bad := func(problem string) error {
		return fmt.Errorf("the committed lock %s is not valid: %s; fix it, or delete it and run pml tools here to write it again from the definitions you accepted", path, problem)
	}
	var c Committed
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, bad(err.Error())
	}
	if c.Version != CommittedVersion {
		return nil, bad(fmt.Sprintf("its version is %d; this pml reads version %d", c.Version, CommittedVersion))
	}
	if c.ToolDefinitions == nil {
		c.ToolDefinitions = map[string]*Section{}
	}
	for server, s := range c.ToolDefinitions {
		if s == nil {
			c.ToolDefinitions[server] = &Section{}
			continue
		}
		for _, m := range []map[string]string{s.Tools, s.Prompts} {
			for name, d := range m {
				if Server(name) != server {
					return nil, bad(fmt.Sprintf("%q is listed under the server %q", name, server))
				}
				if !isDigest(d) {
					return nil, bad(fmt.Sprintf("the digest of %q is not sha256:<64 hex digits>", name))
				}
			}
		}
	}
	return &c, nil
}

// writeCommitted sets the sections of LockName that sections name (by
// kind/server; an empty map removes that kind of that server), under a
// lock in .pml/ shared with every pml of the workspace, keeping every
// other section as the file has it. A file that cannot be read is left
// as it is (the error says so): pml never resets what the person commits.
func writeCommitted(ws string, sections map[string]map[string]string) error {
	// The lock is taken under the workspace's .pml/, never through a
	// link a repository put there.
	// A workspace that is not there (gone, or a test's name) is never
	// made: nothing is written.
	if st, err := os.Stat(ws); err != nil || !st.IsDir() {
		return fmt.Errorf("the workspace %s is not a directory here: %s not written", ws, LockName)
	}
	lockName := filepath.Join(ws, ".pml", "committed-lock.lock")
	if err := safefs.MkdirAll(ws, filepath.Dir(lockName), 0o700); err != nil {
		return err
	}
	lock, err := safefs.OpenLock(ws, lockName, 0o600)
	if err != nil {
		return fmt.Errorf("cannot lock %s: %w", LockName, err)
	}
	defer lock.Close()
	if err := safefs.Lock(lock); err != nil {
		return fmt.Errorf("cannot lock %s: %w", LockName, err)
	}
	defer safefs.Unlock(lock)
	return func() error {
		c, err := ReadCommitted(ws)
		if err != nil {
			return err
		}
		if c == nil {
			c = &Committed{Version: CommittedVersion, ToolDefinitions: map[string]*Section{}}
		}
		for k, names := range sections {
			kind, server, _ := strings.Cut(k, "/")
			s := c.ToolDefinitions[server]
			if s == nil {
				s = &Section{}
				c.ToolDefinitions[server] = s
			}
			m := s.of(kind)
			if len(names) == 0 {
				*m = nil
			} else {
				*m = names
			}
			if len(s.Tools) == 0 && len(s.Prompts) == 0 {
				delete(c.ToolDefinitions, server)
			}
		}
		data, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			return err
		}
		data = append(data, '\n')
		path := filepath.Join(ws, LockName)
		if old, err := safefs.ReadFile(ws, path, maxCommitted); err == nil && bytes.Equal(old, data) {
			return nil
		}
		return safefs.WriteFile(ws, path, data, 0o644)
	}()
}

// section is one kind/server's part of the committed lock as the pins
// make it: each name listed now (names) with the digest pinned for it; a
// held new tool has none and is left out, a held changed one keeps the
// digest accepted. s.mu is held.
func (s *Store) sectionLocked(kind, server string, names []string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if d, ok := s.doc.Digests[key(kind, n)]; ok {
			out[n] = d
		}
	}
	return out
}

// commitLocked writes kind/server's section to the committed lock when it
// is not what this process last saw there; s.mu is held. A failure is
// returned for the caller to say: the pins (what counts) are written.
func (s *Store) commitLocked(kind, server string, section map[string]string, first bool) error {
	if s.noCommit {
		return nil
	}
	k := key(kind, server)
	if s.committed == nil {
		s.committed = map[string]map[string]string{}
		c, err := ReadCommitted(s.ws)
		if err != nil {
			return err
		}
		if c != nil {
			for srv, sec := range c.ToolDefinitions {
				if sec.Tools != nil {
					s.committed[key(KindTool, srv)] = sec.Tools
				}
				if sec.Prompts != nil {
					s.committed[key(KindPrompt, srv)] = sec.Prompts
				}
			}
		}
	}
	if sameDigests(s.committed[k], section) {
		return nil
	}
	var differ []string
	if first {
		for n, d := range section {
			if was, ok := s.committed[k][n]; ok && was != d {
				differ = append(differ, n)
			}
		}
		sort.Strings(differ)
	}
	if err := writeCommitted(s.ws, map[string]map[string]string{k: section}); err != nil {
		return fmt.Errorf("the definitions of %s were pinned, but %s was not written: %w", server, LockName, err)
	}
	s.committed[k] = section
	if len(differ) > 0 {
		return fmt.Errorf("%s said otherwise than %s records (committed) about %s at its first listing here: pml pinned what it says now and wrote it there; review the change (git diff %s) before you commit it", server, LockName, strings.Join(differ, ", "), LockName)
	}
	return nil
}

func sameDigests(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// WriteCommitted writes the committed lock from the person's pins: every
// server they pinned, each with the definitions its last listing had
// (or, pinned by an older pml, every definition pinned for it), keeping
// the sections of servers these pins know nothing of. It is pml lock's
// (the person's) step; it returns how many definitions it records.
func (s *Store) WriteCommitted() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc = nil
	doc, err := s.load()
	if err != nil {
		return 0, err
	}
	sections := map[string]map[string]string{}
	for k := range doc.Servers {
		kind, server, _ := strings.Cut(k, "/")
		names, ok := doc.Listed[k]
		if !ok {
			for dk := range doc.Digests {
				dkind, name, _ := strings.Cut(dk, "/")
				if dkind == kind && Server(name) == server {
					names = append(names, name)
				}
			}
		}
		sections[k] = s.sectionLocked(kind, server, names)
	}
	if len(sections) == 0 {
		return 0, nil
	}
	n := 0
	for _, sec := range sections {
		n += len(sec)
	}
	if err := writeCommitted(s.ws, sections); err != nil {
		return 0, err
	}
	s.committed = nil
	return n, nil
}

// CommittedDrift is how one definition a server lists now stands against
// the committed lock.
type CommittedDrift struct {
	Server string `json:"server"`
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	// Change is "changed" (another digest), "new" (not in the lock) or
	// "removed" (in the lock, not listed now).
	Change string `json:"change"`
	// Committed and Listed are the two digests ("" for none).
	Committed string `json:"committed,omitempty"`
	Listed    string `json:"listed,omitempty"`
}

// CompareCommitted compares what the servers list now (listed: by
// kind/server, each definition) with the committed lock c: every
// definition whose digest differs, every new one and every removed one,
// in order. A server of c not listed at all has each of its definitions
// removed; prompts are compared only for a server whose prompts the lock
// records (the person's pml pins a server's prompts when a client first
// lists them).
func CompareCommitted(c *Committed, listed map[string][]Def) []CommittedDrift {
	var out []CommittedDrift
	seen := map[string]bool{}
	for k, defs := range listed {
		kind, server, _ := strings.Cut(k, "/")
		var was map[string]string
		if sec := c.ToolDefinitions[server]; sec != nil {
			was = *sec.of(kind)
			if kind == KindPrompt && sec.Prompts == nil {
				continue
			}
		} else if kind == KindPrompt {
			continue
		}
		seen[k] = true
		now := map[string]bool{}
		for _, d := range defs {
			now[d.Name] = true
			dg := d.Digest()
			switch w, ok := was[d.Name]; {
			case !ok:
				out = append(out, CommittedDrift{Server: server, Kind: kind, Name: d.Name, Change: string(New), Listed: dg})
			case w != dg:
				out = append(out, CommittedDrift{Server: server, Kind: kind, Name: d.Name, Change: string(Changed), Committed: w, Listed: dg})
			}
		}
		for n, w := range was {
			if !now[n] {
				out = append(out, CommittedDrift{Server: server, Kind: kind, Name: n, Change: "removed", Committed: w})
			}
		}
	}
	for server, sec := range c.ToolDefinitions {
		for _, kind := range []string{KindTool, KindPrompt} {
			if seen[key(kind, server)] {
				continue
			}
			for n, w := range *sec.of(kind) {
				out = append(out, CommittedDrift{Server: server, Kind: kind, Name: n, Change: "removed", Committed: w})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind > out[j].Kind // tools first
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// NoCommit makes the store write no committed lock (a test's store, or
// one whose workspace is a stand-in).
func (s *Store) NoCommit() { s.noCommit = true }
