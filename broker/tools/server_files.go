package tools

import (
	"path/filepath"
	"sort"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/registry"
)

// What a server leaves in the workspace once it ran: its installed
// dependencies (.pml/deps/NAME and its record in .pml/deps.json, the
// lock of what was installed) and its tool list in .pml/tools-cache.json.
// pml remove --clean deletes a server's; pml cleanup those nothing
// references any more.

// Leftover is one thing of a server's in the workspace.
type Leftover struct {
	Server string `json:"server"`
	// Kind is "dependencies" (.pml/deps/NAME and its deps.json record)
	// or "tools cache" (its entry in .pml/tools-cache.json).
	Kind string `json:"kind"`
	Path string `json:"path"`
}

// ServerFiles lists what server name left in workspace ws.
func ServerFiles(ws, name string) ([]Leftover, error) {
	all, err := leftovers(ws)
	if err != nil {
		return nil, err
	}
	var out []Leftover
	for _, l := range all {
		if l.Server == name {
			out = append(out, l)
		}
	}
	return out, nil
}

// Unreferenced lists what servers left in ws that neither cfg (mcps,
// private_mcps), an added capability nor the registry lockfile names any
// more.
func Unreferenced(ws string, cfg *config.Config) ([]Leftover, error) {
	used := map[string]bool{}
	for n := range cfg.Servers {
		used[n] = true
	}
	caps, err := LoadCapabilities(ws)
	if err != nil {
		return nil, err
	}
	for _, c := range caps {
		used[c.Name], used[c.Namespace] = true, true
	}
	// A registry server's files are named by its namespace; the lockfile
	// keeps every entry this workspace fetched.
	if lock, err := registry.LoadLockfileKeeping(registry.LockfilePath(ws), func(string) bool { return true }); err == nil {
		for name := range lock.Entries() {
			if f, err := registry.ParseFQDN(name); err == nil {
				used[f.Namespace] = true
			}
		}
	} else {
		return nil, err
	}
	all, err := leftovers(ws)
	if err != nil {
		return nil, err
	}
	var out []Leftover
	store := deps.NewStore(ws)
	for _, l := range all {
		// A running pml add installs before it writes the entry.
		if !used[l.Server] && !store.Adding(l.Server) {
			out = append(out, l)
		}
	}
	return out, nil
}

// RemoveLeftovers deletes ls.
func RemoveLeftovers(ws string, ls []Leftover) error {
	store := deps.NewStore(ws)
	var cacheNames []string
	for _, l := range ls {
		switch l.Kind {
		case kindDeps:
			if _, err := store.Remove(l.Server); err != nil {
				return err
			}
		case kindToolsCache:
			cacheNames = append(cacheNames, l.Server)
		}
	}
	if len(cacheNames) == 0 {
		return nil
	}
	c := &Cache{Path: toolsCachePath(ws)}
	return c.Forget(cacheNames...)
}

const (
	kindDeps       = "dependencies"
	kindToolsCache = "tools cache"
)

func toolsCachePath(ws string) string { return filepath.Join(ws, ".pml", "tools-cache.json") }

// leftovers lists every server's files in ws, by server then kind.
func leftovers(ws string) ([]Leftover, error) {
	names, err := deps.NewStore(ws).Names()
	if err != nil {
		return nil, err
	}
	var out []Leftover
	store := deps.NewStore(ws)
	for _, n := range names {
		out = append(out, Leftover{Server: n, Kind: kindDeps, Path: store.Dir(n)})
	}
	c := &Cache{Path: toolsCachePath(ws)}
	cached := c.Read()
	keys := make([]string, 0, len(cached))
	for n := range cached {
		keys = append(keys, n)
	}
	sort.Strings(keys)
	for _, n := range keys {
		out = append(out, Leftover{Server: n, Kind: kindToolsCache, Path: c.Path})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out, nil
}
