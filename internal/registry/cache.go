package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/vouch"
)

// CacheDir is where a workspace keeps fetched entries for offline use.
func CacheDir(workspace string) string {
	return filepath.Join(workspace, ".pml", "registry-cache")
}

// record is one cached entry, as served. It is stored as
// <dir>/<org.project.namespace.action>.json (the 4-part name, which is
// always a safe file name), holding the latest version fetched, so a
// 4-part name can be served offline too.
type record struct {
	FQDN      string    `json:"fqdn"`
	Version   string    `json:"version,omitempty"`
	Type      string    `json:"type"`
	Routing   string    `json:"routing"`
	Integrity string    `json:"integrity"`
	Registry  string    `json:"registry"`
	FetchedAt time.Time `json:"fetchedAt"`
	// Body is the response body exactly as served (base64 in the file, so
	// code that is not valid UTF-8 survives).
	Body []byte `json:"body"`
	// TwoStep: Body is a deno entry's metadata and Code the code its
	// codeUrl served.
	TwoStep bool   `json:"twoStep,omitempty"`
	Code    []byte `json:"code,omitempty"`
	// Vouch is the user's MAC over the record (internal/vouch): a copy
	// the repository committed, or another machine or path cached, is not
	// served, offline or as a 304's body.
	Vouch string `json:"vouch,omitempty"`
}

// payload is what a record's vouch covers: the record without it.
func (r record) payload() []byte {
	r.Vouch = ""
	b, _ := json.Marshal(r)
	return b
}

// cache is the in-memory cache in front of the on-disk one. An empty dir
// keeps it in memory only. Safe for concurrent use.
type cache struct {
	dir string
	mu  sync.Mutex
	mem map[string]*record
}

func newCache(dir string) *cache {
	return &cache{dir: dir, mem: map[string]*record{}}
}

// get returns the cached record for a 4-part name, or nil. A file that
// cannot be read or decoded is reported, not trusted; the entry built from
// a record is verified against its integrity again by the caller.
func (c *cache) get(base string) (*record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.mem[base]; ok {
		return r, nil
	}
	if c.dir == "" {
		return nil, nil
	}
	p := filepath.Join(c.dir, base+".json")
	data, err := safefs.ReadFile(c.root(), p, safefs.MaxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the cached copy %s: %w", p, err)
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("the cached copy %s is corrupt (%v); it is replaced on the next successful fetch", p, err)
	}
	if !vouch.Check(c.root(), vouch.Cache, base, r.payload(), r.Vouch) {
		return nil, fmt.Errorf("the cached copy %s is not honoured: %s; it is fetched again, and replaced on the next successful fetch", p, vouch.Why(r.Vouch))
	}
	c.mem[base] = &r
	return &r, nil
}

// put stores r in memory and, atomically, on disk.
func (c *cache) put(base string, r *record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mem[base] = r
	if c.dir == "" {
		return nil
	}
	sealed := *r
	sum, err := vouch.Seal(c.root(), vouch.Cache, base, sealed.payload())
	if err != nil {
		return err
	}
	sealed.Vouch = sum
	data, err := json.Marshal(sealed)
	if err != nil {
		return err
	}
	if err := safefs.MkdirAll(c.root(), c.dir, 0o700); err != nil {
		return fmt.Errorf("cannot create the registry cache %s: %w", c.dir, err)
	}
	return safefs.WriteFile(c.root(), filepath.Join(c.dir, base+".json"), data, 0o644)
}

// root is the workspace of the cache directory <workspace>/.pml/registry-cache:
// nothing below it is opened through a link (internal/safefs).
func (c *cache) root() string { return filepath.Dir(filepath.Dir(c.dir)) }

// UnvouchedCache lists the files of workspace ws's registry cache that
// carry no valid vouch of this user's pml there (pml lock --check): they
// are not served, and are replaced at the next fetch.
func UnvouchedCache(ws string) ([]string, error) {
	dir := CacheDir(ws)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c := newCache(dir)
	var out []string
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		if r, err := c.get(base); err != nil || r == nil {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}
