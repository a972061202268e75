package tools

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/safefs"
)

// Cache keeps each server's tool list in .pml/tools-cache.json, keyed
// by its configuration, so a later session lists them without a start.
type Cache struct {
	Path string
	mu   sync.Mutex
}

type CachedTools struct {
	Spec  string      `json:"spec"`
	Tools []*mcp.Tool `json:"tools"`
}

func SpecKey(cfg config.Server) string {
	b, _ := json.Marshal(cfg)
	return fmt.Sprintf("%x", sha256Sum(b))
}

// Root is the workspace of the cache file <workspace>/.pml/tools-cache.json:
// the file is never read or written through a link below it.
func (c *Cache) Root() string { return filepath.Dir(filepath.Dir(c.Path)) }

func (c *Cache) Read() map[string]CachedTools {
	m := map[string]CachedTools{}
	if b, err := safefs.ReadFile(c.Root(), c.Path, safefs.MaxConfig); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

func (c *Cache) Get(cfg config.Server) ([]*mcp.Tool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.Read()[cfg.Name]
	if !ok || e.Spec != SpecKey(cfg) || len(e.Tools) == 0 {
		return nil, false
	}
	return e.Tools, true
}

func (c *Cache) Put(cfg config.Server, tools []*mcp.Tool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.Read()
	m[cfg.Name] = CachedTools{Spec: SpecKey(cfg), Tools: tools}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return
	}
	if err := safefs.MkdirAll(c.Root(), filepath.Dir(c.Path), 0o755); err == nil {
		// Not synced: a lost cache only costs a server's start, and this
		// write is on the way to a first call's answer.
		_ = safefs.WriteCache(c.Root(), c.Path, append(b, '\n'), 0o644)
	}
}

// Forget drops names from the cache file.
func (c *Cache) Forget(names ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.Read()
	for _, n := range names {
		delete(m, n)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return safefs.WriteFile(c.Root(), c.Path, append(b, '\n'), 0o644)
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
