// Package routing decides where a tool runs: "client" (here, in a
// container) or "server" (forwarded to the PML cloud). The platform decides
// the table; pml starts from an embedded default, syncs it from
// {cloud}/routing in the background and keeps the last good copy in
// .pml/routing-cache.json so an offline start routes the same way.
//
// The invariant it protects: anything not known to be server-routed runs
// here, so a local call never leaves the machine by accident.
package routing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pml-dev/pml/internal/keysafe"
	"github.com/pml-dev/pml/internal/lazyre"
	"github.com/pml-dev/pml/internal/safefs"
)

// Where a tool runs.
const (
	Client = "client"
	Server = "server"
)

// CacheFile is the synced table, relative to the workspace.
const CacheFile = ".pml/routing-cache.json"

// Table is the routing table as {cloud}/routing serves it: namespaces
// listed under server or client, everything else goes to Default.
type Table struct {
	Version string   `json:"version"`
	Server  []string `json:"server"`
	Client  []string `json:"client"`
	Default string   `json:"default"`
	// SyncedAt is when pml fetched it (absent in the embedded default).
	SyncedAt time.Time `json:"synced_at,omitempty"`
}

// Default is the embedded table (seed 003's cloud list). "memory" is not
// in it: in pml a stdio memory server runs locally.
func Default() Table {
	return Table{
		Version: "embedded",
		Server: []string{
			"tavily", "brave_search", "exa", "github", "slack", "api", "http", "fetch",
			"sequential-thinking", "context7", "magic", "json", "math", "datetime", "crypto", "pml",
		},
		Client:  []string{"filesystem", "shell"},
		Default: Client,
	}
}

var namespaceRE = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// Validate refuses a table that could send local calls to the cloud by
// mistake: unknown default values, malformed names, a namespace in both
// lists.
func (t Table) Validate() error {
	if t.Default != "" && t.Default != Client && t.Default != Server {
		return fmt.Errorf("routing table: default must be %q or %q, not %q", Client, Server, t.Default)
	}
	seen := map[string]string{}
	for _, side := range []struct {
		name string
		list []string
	}{{Server, t.Server}, {Client, t.Client}} {
		for _, ns := range side.list {
			if !namespaceRE.MatchString(ns) {
				return fmt.Errorf("routing table: %q is not a namespace", ns)
			}
			if other, ok := seen[ns]; ok && other != side.name {
				return fmt.Errorf("routing table: %q is listed as both client and server", ns)
			}
			seen[ns] = side.name
		}
	}
	return nil
}

// Router answers where a namespace runs. Safe for concurrent use.
type Router struct {
	mu     sync.RWMutex
	table  Table
	server map[string]bool
	client map[string]bool
	// local namespaces (toolbox, configured servers) always run here,
	// whatever the table says.
	local map[string]bool
	// extra namespaces run in the cloud because a registry entry (type
	// http) says so; a synced table does not replace them.
	extra map[string]bool
	cache string
	// ws is the workspace: the cache is never read or written through a
	// link below it (internal/safefs).
	ws string
}

// New starts from the cached table in workspace (when valid), else the
// embedded default. local names namespaces that always run here.
func New(workspace string, local []string) *Router {
	r := &Router{cache: filepath.Join(workspace, CacheFile), ws: workspace, local: map[string]bool{}, extra: map[string]bool{}}
	for _, ns := range local {
		r.local[ns] = true
	}
	t := Default()
	if cached, err := readCache(r.ws, r.cache); err == nil {
		t = cached
	}
	r.set(t)
	return r
}

func readCache(ws, path string) (Table, error) {
	b, err := safefs.ReadFile(ws, path, safefs.MaxConfig)
	if err != nil {
		return Table{}, err
	}
	var t Table
	if err := json.Unmarshal(b, &t); err != nil {
		return Table{}, err
	}
	return t, t.Validate()
}

func (r *Router) set(t Table) {
	server, client := map[string]bool{}, map[string]bool{}
	for _, ns := range t.Server {
		server[ns] = true
	}
	for _, ns := range t.Client {
		client[ns] = true
	}
	r.mu.Lock()
	r.table, r.server, r.client = t, server, client
	r.mu.Unlock()
}

// AddLocal marks namespaces that run here (servers added at run time).
func (r *Router) AddLocal(ns ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range ns {
		r.local[n] = true
	}
}

// AddServer marks namespaces that run in the cloud (a registry entry of
// type http). A namespace that runs here stays here.
func (r *Router) AddServer(ns ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range ns {
		r.extra[n] = true
	}
}

// Namespace returns the part of a tool name before ':'.
func Namespace(tool string) string {
	ns, _, _ := strings.Cut(tool, ":")
	return ns
}

// Route returns Client or Server for a tool name.
func (r *Router) Route(tool string) string {
	ns := Namespace(tool)
	r.mu.RLock()
	defer r.mu.RUnlock()
	switch {
	case r.local[ns], r.client[ns]:
		return Client
	case r.server[ns], r.extra[ns]:
		return Server
	}
	// Unknown namespaces run here even if a table says "default": "server":
	// sending an unknown tool's arguments (file contents, paths) to the
	// cloud is the leak this package exists to prevent.
	return Client
}

// Table returns the table in use.
func (r *Router) Table() Table {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.table
}

// maxTable bounds the routing document.
const maxTable = 1 << 20

// Sync fetches {cloudURL}/routing and, when it is valid, uses it and
// writes the cache. On any failure the table in use stays as it was.
func (r *Router) Sync(ctx context.Context, hc *http.Client, cloudURL, apiKey string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cloudURL+"/routing", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-PML-Client", "package")
	if apiKey != "" {
		req.Header.Set("x-api-key", apiKey)
	}
	var resp *http.Response
	if apiKey != "" {
		// The key goes only over https (or http to loopback): checked
		// before dialling, and on every redirect.
		resp, err = keysafe.Do(hc, req, "cloud.url", cloudURL)
	} else {
		resp, err = hc.Do(req)
	}
	if errors.Is(err, keysafe.ErrInsecure) {
		return err
	}
	if err != nil {
		return fmt.Errorf("fetching the routing table from %s: %w", cloudURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching the routing table from %s: HTTP %d", cloudURL, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTable+1))
	if err != nil {
		return fmt.Errorf("reading the routing table from %s: %w", cloudURL, err)
	}
	if len(body) > maxTable {
		return fmt.Errorf("the routing table from %s is larger than %d bytes", cloudURL, maxTable)
	}
	var t Table
	if err := json.Unmarshal(body, &t); err != nil {
		return fmt.Errorf("the routing table from %s is not valid JSON: %w", cloudURL, err)
	}
	if err := t.Validate(); err != nil {
		return fmt.Errorf("%s/routing: %w", cloudURL, err)
	}
	if t.Default == "" {
		t.Default = Client
	}
	sort.Strings(t.Server)
	sort.Strings(t.Client)
	t.SyncedAt = time.Now().UTC()
	r.set(t)
	out, _ := json.MarshalIndent(t, "", "  ")
	if err := safefs.MkdirAll(r.ws, filepath.Dir(r.cache), 0o755); err != nil {
		return fmt.Errorf("caching the routing table: %w", err)
	}
	if err := safefs.WriteFile(r.ws, r.cache, append(out, '\n'), 0o644); err != nil {
		return fmt.Errorf("caching the routing table: %w", err)
	}
	return nil
}
