// Package entrygrant records what a person granted a registry entry of
// this machine: the host variables whose values it receives, the hosts
// they (or its container) reach, and the image it runs in. A registry
// entry is untrusted; what it asks for of these is not a permission of the
// tool (an allow pattern lets a call run, not a server read
// AWS_SECRET_ACCESS_KEY) but a grant of its own, put to the person before
// the entry's first start or call and again after any change of it.
//
// The record lives beside the trust records, in the user's state
// directory ($XDG_STATE_HOME/pml/entry-grants.json, else
// ~/.local/state/pml/entry-grants.json), 0600, replaced atomically under
// a lock, keyed by workspace: a repository, a container or the model can
// write nothing there.
package entrygrant

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pml-dev/pml/internal/statefile"
)

// FileName is the store's name in pml's state directory.
const FileName = "entry-grants.json"

// Grant is what one registry entry gets of this machine.
type Grant struct {
	// Namespace is the entry's namespace (its tools' prefix); Entry its
	// registry name (pml.mcp.NS.server) and Registry where it came from,
	// for the person reading the record.
	Namespace string `json:"namespace"`
	Entry     string `json:"entry,omitempty"`
	Registry  string `json:"registry,omitempty"`
	// Kind is "stdio" (a server pml runs) or "http" (forwarded to the
	// cloud).
	Kind string `json:"kind"`
	// Env are the names of the host variables whose values it receives
	// (a stdio server's environment, an http entry's X-Pml-Byok-* headers).
	Env []string `json:"env,omitempty"`
	// Hosts are where it reaches: a stdio server's network allow list
	// (host:port); for an http entry, the cloud.url host its keys are sent
	// to and the proxy_to host they are forwarded to.
	Hosts []string `json:"hosts,omitempty"`
	// Image is the container image the entry chose ("" when pml's own).
	Image string `json:"image,omitempty"`
	// At is when the person granted it.
	At time.Time `json:"at,omitempty"`
}

// Normal returns g with its lists sorted and without repeats, so grants
// compare by content.
func (g Grant) Normal() Grant {
	g.Env = sortedSet(g.Env)
	if g.Kind != "http" {
		// An http entry's hosts are in order: the cloud, then the API
		// it forwards to.
		g.Hosts = sortedSet(g.Hosts)
	}
	return g
}

func sortedSet(l []string) []string {
	if len(l) == 0 {
		return nil
	}
	out := append([]string(nil), l...)
	sort.Strings(out)
	return slices.Compact(out)
}

// Empty reports whether g grants nothing of this machine: no variable, no
// host of a server's network, no image of the entry's choice. An http
// entry's hosts alone grant nothing: without variables only the call's
// arguments are sent, which the tool's permission covers.
func (g Grant) Empty() bool {
	if len(g.Env) > 0 || g.Image != "" {
		return false
	}
	return g.Kind == "http" || len(g.Hosts) == 0
}

// Covers reports whether the granted g covers want: every variable and
// every host of want was granted, and the same image. Fewer variables or
// hosts are covered (they grant less); anything new is not.
func (g Grant) Covers(want Grant) bool {
	if g.Kind != want.Kind || g.Image != want.Image {
		return false
	}
	for _, v := range want.Env {
		if !slices.Contains(g.Env, v) {
			return false
		}
	}
	for _, h := range want.Hosts {
		if !slices.Contains(g.Hosts, h) {
			return false
		}
	}
	return true
}

// Describe is the grant as a sentence for a person: names only, never a
// value. The names come from a registry: the caller quotes the result
// (termsafe) before showing it.
func (g Grant) Describe() string {
	env := "no host variable"
	if len(g.Env) > 0 {
		env = "the values of " + strings.Join(g.Env, ", ") + " (read from pml's environment or the workspace's .env)"
	}
	switch g.Kind {
	case "http":
		return fmt.Sprintf("each call sends %s, as X-Pml-Byok-* headers, to %s", env, describeHosts(g.Hosts))
	}
	net := "no network"
	if len(g.Hosts) > 0 {
		net = "the network hosts " + strings.Join(g.Hosts, ", ")
	}
	img := "pml's own image"
	if g.Image != "" {
		img = "the image " + g.Image + " (the registry's choice)"
	}
	return fmt.Sprintf("its container gets %s, may reach %s, and runs %s", env, net, img)
}

func describeHosts(hosts []string) string {
	switch len(hosts) {
	case 0:
		return "the PML cloud"
	case 1:
		return hosts[0]
	}
	return strings.Join(hosts[:len(hosts)-1], ", ") + ", which forwards them to " + hosts[len(hosts)-1]
}

type document struct {
	Version int `json:"version"`
	// Workspaces maps a workspace's absolute path to its grants by
	// namespace.
	Workspaces map[string]map[string]Grant `json:"workspaces"`
}

// Store is the grants file at Path; with Path "" it keeps grants in
// memory only (for the session).
type Store struct {
	Path string

	mu  sync.Mutex
	mem map[string]map[string]Grant
}

// Open returns the store in the state directory dir (trust.Dir).
func Open(dir string) *Store { return &Store{Path: filepath.Join(dir, FileName)} }

// Memory is a store that forgets with the process: what pml uses when
// the person has no state directory.
func Memory() *Store { return &Store{} }

func (s *Store) read() (*document, error) {
	doc := &document{Version: 1, Workspaces: map[string]map[string]Grant{}}
	if err := s.private(); err != nil {
		return nil, err
	}
	if err := s.file().Read(doc); err != nil {
		return nil, err
	}
	if doc.Workspaces == nil {
		doc.Workspaces = map[string]map[string]Grant{}
	}
	return doc, nil
}

// private refuses a store someone else than the person can change: its
// records would be their grants.
func (s *Store) private() error { return s.file().Private() }

// file is the store as a state file.
func (s *Store) file() statefile.File {
	return statefile.File{Path: s.Path, What: "pml's registry grants", Plural: true, Max: 16 << 20,
		Fix: "move the file aside (every registry entry then asks again)"}
}

// Lookup returns what was granted the entry of namespace ns in workspace
// ws (nil: nothing).
func (s *Store) Lookup(ws, ns string) (*Grant, error) {
	if s.Path == "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		if g, ok := s.mem[ws][ns]; ok {
			return &g, nil
		}
		return nil, nil
	}
	doc, err := s.read()
	if err != nil {
		return nil, err
	}
	if g, ok := doc.Workspaces[ws][ns]; ok {
		return &g, nil
	}
	return nil, nil
}

// Granted reports whether want is covered by what was granted (an empty
// want needs nothing). An unreadable store grants nothing; its error
// says why.
func (s *Store) Granted(ws string, want Grant) (bool, error) {
	want = want.Normal()
	if want.Empty() {
		return true, nil
	}
	g, err := s.Lookup(ws, want.Namespace)
	if err != nil || g == nil {
		return false, err
	}
	return g.Normal().Covers(want), nil
}

// Restore puts the grant of namespace ns in ws back to prev (nil: none),
// as it was before a pml add that failed recorded another.
func (s *Store) Restore(ws, ns string, prev *Grant) error {
	return s.change(ws, func(m map[string]Grant) {
		if prev == nil {
			delete(m, ns)
		} else {
			m[ns] = *prev
		}
	})
}

// Record saves g as what the person granted its entry in ws, replacing
// any earlier grant of that namespace.
func (s *Store) Record(ws string, g Grant) error {
	g = g.Normal()
	g.At = time.Now().UTC().Truncate(time.Second)
	return s.change(ws, func(m map[string]Grant) { m[g.Namespace] = g })
}

// change applies edit to the grants of ws, in memory or in the file
// (under its lock, written atomically, 0600).
func (s *Store) change(ws string, edit func(map[string]Grant)) error {
	if s.Path == "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.mem == nil {
			s.mem = map[string]map[string]Grant{}
		}
		if s.mem[ws] == nil {
			s.mem[ws] = map[string]Grant{}
		}
		edit(s.mem[ws])
		return nil
	}
	if err := s.private(); err != nil {
		return err
	}
	return s.file().Update(func() (any, error) {
		doc, err := s.read()
		if err != nil {
			return nil, err
		}
		if doc.Workspaces[ws] == nil {
			doc.Workspaces[ws] = map[string]Grant{}
		}
		edit(doc.Workspaces[ws])
		if len(doc.Workspaces[ws]) == 0 {
			delete(doc.Workspaces, ws)
		}
		return doc, nil
	})
}
