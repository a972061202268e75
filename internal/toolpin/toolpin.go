// Package toolpin pins what a server says its tools are: each tool's
// definition (name, title, description, input and output schemas,
// annotations) as the client is shown it, recorded at the first listing
// of its server and compared at every later one. A server that was
// trusted can change what it says at run time (a new version, or simply a
// different answer): a description that tells the model to read a key and
// pass it on, a new tool, a schema that asks for a token ("rug pull",
// tool poisoning). What changed, and every new tool of a server already
// pinned, is held until a person accepts what they were shown.
//
// The pins live in the person's state directory (statefile), one file per
// workspace keyed by its path, never under the workspace's .pml/: a
// repository, or anything that can write the workspace, cannot pin a
// definition the person did not see, nor unpin one (docs/security.md,
// "Records a repository could have written vouch for nothing").
package toolpin

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/statefile"
)

// Kinds of what is pinned: a tool, or a prompt (its description and
// arguments carry instructions as a tool's do).
const (
	KindTool   = "tool"
	KindPrompt = "prompt"
)

// Def is one pinned definition, as the client is shown it.
type Def struct {
	Kind         string          `json:"kind,omitempty"` // "" is KindTool
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

// Digest is the definition's SHA-256 over its parts, each prefixed by
// its length (no two definitions share an input). The schemas are hashed
// as listed: pml marshals what a server sent (object keys sorted), so
// the same schema is the same bytes; hashing them as they are keeps the
// check of a 20-server listing well under a millisecond (no re-parse).
func (d Def) Digest() string {
	h := sha256.New()
	kind := d.Kind
	if kind == "" {
		kind = KindTool
	}
	for _, p := range [][]byte{[]byte(kind), []byte(d.Name), []byte(d.Title), []byte(d.Description), raw(d.InputSchema), raw(d.OutputSchema), raw(d.Annotations)} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// raw is a JSON part as hashed: absent and null are the same.
func raw(r json.RawMessage) []byte {
	if string(r) == "null" {
		return nil
	}
	return r
}

func compact(r json.RawMessage) json.RawMessage {
	if len(r) == 0 || string(r) == "null" {
		return nil
	}
	var v any
	if json.Unmarshal(r, &v) != nil {
		return r
	}
	b, _ := json.Marshal(v) // map keys sorted
	return b
}

// Server is the server a listed name belongs to: what is before its
// first ':' (server:tool, namespace:action).
func Server(name string) string {
	s, _, _ := strings.Cut(name, ":")
	return s
}

// State is how a listed definition stands against the pins.
type State string

const (
	// Changed: the definition differs from the one pinned.
	Changed State = "changed"
	// New: its server has pins, but not this name.
	New State = "new"
)

// Drift is a held definition: what changed, for the person to see.
type Drift struct {
	State State `json:"state"`
	// Now is the definition listed now (and its digest), Was the pinned
	// one (nil for a new tool).
	Now    Def    `json:"now"`
	Digest string `json:"digest"`
	Was    *Def   `json:"was,omitempty"`
}

// index is the file read at every start: which servers were listed,
// each pinned definition's digest, the drifts last seen. The definitions
// themselves (for the diffs) are in the defs file, read only when a
// definition drifted: a 20-server listing reads a few kilobytes.
type index struct {
	Version   int               `json:"version"`
	Workspace string            `json:"workspace"`
	Servers   map[string]bool   `json:"servers"` // by kind/server
	Digests   map[string]string `json:"digests"` // by kind/name
	// Drifts are the held definitions pml last saw listed, by kind/name:
	// what pml lock shows and --accept pins, what lock --check fails on.
	// pml wrote each from what the server listed; none pins anything.
	Drifts map[string]Drift `json:"drifts,omitempty"`
	// Listed are the names each kind/server listed last (held ones too),
	// sorted: what its section of the committed lock (LockName) covers.
	Listed map[string][]string `json:"listed,omitempty"`
}

// defsFile holds the pinned definitions, by kind/name.
type defsFile struct {
	Workspace string         `json:"workspace"`
	Defs      map[string]Def `json:"defs"`
}

// Store is a workspace's pins. Safe for concurrent use.
type Store struct {
	file, defs statefile.File
	ws         string
	mu         sync.Mutex
	doc        *index
	// committed is the committed lock's sections as this process last
	// read or wrote them, by kind/server (nil: not read yet); noCommit
	// writes none.
	committed map[string]map[string]string
	noCommit  bool
	// OnCommitErr is told when the committed lock could not be written
	// (the pins, which count, were), or when a first listing here replaced
	// a digest it recorded: a session logs it.
	OnCommitErr func(error)
}

// Dir is where the pins of every workspace are, under the state directory.
const Dir = "toolpins"

// Open returns the pins of workspace ws for the person whose environment
// getenv reads.
func Open(ws string, getenv func(string) string) (*Store, error) {
	d, ok := statefile.Dir(getenv)
	if !ok {
		return nil, errors.New("cannot keep the pinned tool definitions: neither XDG_STATE_HOME nor HOME is set to an absolute path; set one")
	}
	ws = filepath.Clean(ws)
	sum := sha256.Sum256([]byte(ws))
	base := filepath.Join(d, Dir, hex.EncodeToString(sum[:12]))
	fix := "delete it: every server's tools are then pinned again at their next listing"
	return &Store{ws: ws,
		file: statefile.File{Path: base + ".json", What: "pml's pinned tool definitions", Plural: true, Max: 16 << 20, Fix: fix},
		defs: statefile.File{Path: base + ".defs.json", What: "pml's pinned tool definitions", Plural: true, Max: 64 << 20, Fix: fix},
	}, nil
}

// Path is the file that holds the pins' digests.
func (s *Store) Path() string { return s.file.Path }

func key(kind, name string) string {
	if kind == "" {
		kind = KindTool
	}
	return kind + "/" + name
}

// load reads the index once; s.mu is held.
func (s *Store) load() (*index, error) {
	if s.doc != nil {
		return s.doc, nil
	}
	if err := os.MkdirAll(filepath.Dir(s.file.Path), 0o700); err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", filepath.Dir(s.file.Path), err)
	}
	// Someone else who could write the pins could accept for the person.
	if err := safefs.Private(filepath.Dir(s.file.Path), s.file.What, filepath.Base(s.file.Path), filepath.Base(s.file.Path)+".lock", filepath.Base(s.defs.Path), filepath.Base(s.defs.Path)+".lock"); err != nil {
		return nil, err
	}
	doc, err := s.read()
	if err != nil {
		return nil, err
	}
	s.doc = doc
	return doc, nil
}

func (s *Store) read() (*index, error) {
	doc := &index{}
	if err := s.file.Read(doc); err != nil {
		return nil, err
	}
	if doc.Servers == nil || doc.Workspace != s.ws {
		// None yet, or another workspace's (its pins pin nothing here).
		doc = &index{Version: 1, Workspace: s.ws, Servers: map[string]bool{}}
	}
	if doc.Digests == nil {
		doc.Digests = map[string]string{}
	}
	return doc, nil
}

// readDefs reads the pinned definitions (only when one drifted).
func (s *Store) readDefs() (*defsFile, error) {
	f := &defsFile{}
	if err := s.defs.Read(f); err != nil {
		return nil, err
	}
	if f.Defs == nil || f.Workspace != s.ws {
		f = &defsFile{Workspace: s.ws, Defs: map[string]Def{}}
	}
	// The file is written indented, which re-indents the schemas: they
	// are made the bytes pml listed again (compact, as json.Marshal
	// wrote them), so their digests are what they were.
	for k, d := range f.Defs {
		f.Defs[k] = d.compacted()
	}
	return f, nil
}

func (d Def) compacted() Def {
	for _, r := range []*json.RawMessage{&d.InputSchema, &d.OutputSchema, &d.Annotations} {
		if len(*r) == 0 {
			continue
		}
		var b bytes.Buffer
		if json.Compact(&b, *r) == nil {
			*r = b.Bytes()
		}
	}
	return d
}

// Reload forgets what was read, so the next check reads the file again
// (another pml of the workspace may have accepted a change).
func (s *Store) Reload() {
	s.mu.Lock()
	s.doc = nil
	s.mu.Unlock()
}

// Check compares the definitions one server lists now with its pins. A
// server with nothing pinned is pinned whole (its first listing: trusted,
// and what pml shows from now on). It returns the drifts, by name: each a
// definition that is not to be used until accepted.
//
// kind is what defs are (KindTool, KindPrompt): a server's prompts are
// first listed apart from its tools.
func (s *Store) Check(kind, server string, defs []Def) (map[string]*Drift, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	doc, err := s.load()
	if err != nil {
		return nil, err
	}
	if !doc.Servers[key(kind, server)] {
		return nil, s.pinLocked(kind, server, defs, true)
	}
	var held map[string]*Drift
	var pinned *defsFile
	for _, d := range defs {
		dg := d.Digest()
		was, ok := doc.Digests[key(d.Kind, d.Name)]
		if ok && was == dg {
			continue
		}
		if held == nil {
			held = map[string]*Drift{}
		}
		dr := &Drift{State: New, Now: d, Digest: dg}
		if ok {
			dr.State = Changed
			if pinned == nil {
				if pinned, err = s.readDefs(); err != nil {
					return nil, err
				}
			}
			if p, ok := pinned.Defs[key(d.Kind, d.Name)]; ok {
				dr.Was = &p
			}
		}
		held[d.Name] = dr
	}
	if err := s.noteDriftsLocked(kind, server, held); err != nil {
		return held, err
	}
	if err := s.noteListedLocked(kind, server, defs); err != nil {
		return held, err
	}
	s.commitSection(kind, server, false)
	return held, nil
}

// names are the sorted names of defs.
func names(defs []Def) []string {
	out := make([]string, 0, len(defs))
	for _, d := range defs {
		out = append(out, d.Name)
	}
	sort.Strings(out)
	return out
}

// noteListedLocked records the names server's listing has when they are
// not the ones the file has (a tool added or removed); s.mu is held.
func (s *Store) noteListedLocked(kind, server string, defs []Def) error {
	k := key(kind, server)
	now := names(defs)
	if was, ok := s.doc.Listed[k]; ok && slices.Equal(was, now) {
		return nil
	}
	return s.file.Update(func() (any, error) {
		doc, err := s.read()
		if err != nil {
			return nil, err
		}
		if doc.Listed == nil {
			doc.Listed = map[string][]string{}
		}
		doc.Listed[k] = now
		s.doc = doc
		return doc, nil
	})
}

// commitSection writes kind/server's section of the committed lock from
// the pins (names listed last, each with its pinned digest); a failure
// goes to OnCommitErr. s.mu is held.
//
// first: the section is of a server's first listing here (trust on first
// use): a digest it replaces in the committed lock is said, for the person
// to review (the committed lock says someone accepted something else).
func (s *Store) commitSection(kind, server string, first bool) {
	k := key(kind, server)
	ns, ok := s.doc.Listed[k]
	if !ok {
		for dk := range s.doc.Digests {
			dkind, name, _ := strings.Cut(dk, "/")
			if dkind == kind && Server(name) == server {
				ns = append(ns, name)
			}
		}
	}
	if err := s.commitLocked(kind, server, s.sectionLocked(kind, server, ns), first); err != nil && s.OnCommitErr != nil {
		s.OnCommitErr(err)
	}
}

// noteDriftsLocked records the drifts of server's listing when they are
// not what the file says (most listings change nothing, and write
// nothing); s.mu is held.
func (s *Store) noteDriftsLocked(kind, server string, held map[string]*Drift) error {
	mine := func(d Drift) bool { return Server(d.Now.Name) == server && kindOf(d.Now) == kind }
	same := true
	n := 0
	for k, d := range s.doc.Drifts {
		if !mine(d) {
			continue
		}
		n++
		h := held[d.Now.Name]
		if h == nil || key(h.Now.Kind, h.Now.Name) != k || h.Digest != d.Digest {
			same = false
		}
	}
	if same && n == len(held) {
		return nil
	}
	return s.file.Update(func() (any, error) {
		doc, err := s.read()
		if err != nil {
			return nil, err
		}
		for k, d := range doc.Drifts {
			if mine(d) {
				delete(doc.Drifts, k)
			}
		}
		for _, h := range held {
			if doc.Drifts == nil {
				doc.Drifts = map[string]Drift{}
			}
			doc.Drifts[key(h.Now.Kind, h.Now.Name)] = *h
		}
		s.doc = doc
		return doc, nil
	})
}

// Drifts lists the held definitions pml last saw, by kind/name, in order.
func (s *Store) Drifts() ([]Drift, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc = nil
	doc, err := s.load()
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(doc.Drifts))
	for k := range doc.Drifts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Drift, 0, len(keys))
	for _, k := range keys {
		d := doc.Drifts[k]
		d.Now = d.Now.compacted()
		if d.Was != nil {
			w := d.Was.compacted()
			d.Was = &w
		}
		out = append(out, d)
	}
	return out, nil
}

// Accept pins d, whose digest must be digest: what the person was shown
// is what is pinned, never what the server lists by the time they answer.
func (s *Store) Accept(d Def, digest string) error {
	if d.Digest() != digest {
		return fmt.Errorf("the definition of %s accepted is not the one shown; nothing was pinned", d.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.load(); err != nil {
		return err
	}
	return s.pinLocked(kindOf(d), Server(d.Name), []Def{d}, false)
}

// pinLocked writes defs as pinned (and their server as listed) under the
// files' locks, merged with what another pml wrote: the definitions
// first, then their digests, which are what counts; then the committed
// lock's section of server. listing: defs are the server's whole listing
// (its first), not one accepted definition. s.mu is held.
func (s *Store) pinLocked(kind, server string, defs []Def, listing bool) error {
	err := s.defs.Update(func() (any, error) {
		f, err := s.readDefs()
		if err != nil {
			return nil, err
		}
		for _, d := range defs {
			f.Defs[key(d.Kind, d.Name)] = d
		}
		return f, nil
	})
	if err != nil {
		return err
	}
	err = s.file.Update(func() (any, error) {
		doc, err := s.read()
		if err != nil {
			return nil, err
		}
		doc.Servers[key(kind, server)] = true
		if listing {
			if doc.Listed == nil {
				doc.Listed = map[string][]string{}
			}
			doc.Listed[key(kind, server)] = names(defs)
		}
		for _, d := range defs {
			k := key(d.Kind, d.Name)
			doc.Digests[k] = d.Digest()
			if dr, ok := doc.Drifts[k]; ok && dr.Digest == doc.Digests[k] {
				delete(doc.Drifts, k)
			}
		}
		s.doc = doc
		return doc, nil
	})
	if err != nil {
		return err
	}
	s.commitSection(kind, server, listing)
	return nil
}
