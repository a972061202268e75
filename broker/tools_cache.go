package broker

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

// toolsCache keeps each server's tool list in .pml/tools-cache.json, keyed
// by its configuration, so a later session lists them without a start.
type toolsCache struct {
	path string
	mu   sync.Mutex
}

type cachedTools struct {
	Spec  string      `json:"spec"`
	Tools []*mcp.Tool `json:"tools"`
}

func specKey(cfg config.Server) string {
	b, _ := json.Marshal(cfg)
	return fmt.Sprintf("%x", sha256Sum(b))
}

// root is the workspace of the cache file <workspace>/.pml/tools-cache.json:
// the file is never read or written through a link below it.
func (c *toolsCache) root() string { return filepath.Dir(filepath.Dir(c.path)) }

func (c *toolsCache) read() map[string]cachedTools {
	m := map[string]cachedTools{}
	if b, err := safefs.ReadFile(c.root(), c.path, safefs.MaxConfig); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

func (c *toolsCache) get(cfg config.Server) ([]*mcp.Tool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.read()[cfg.Name]
	if !ok || e.Spec != specKey(cfg) || len(e.Tools) == 0 {
		return nil, false
	}
	return e.Tools, true
}

func (c *toolsCache) put(cfg config.Server, tools []*mcp.Tool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.read()
	m[cfg.Name] = cachedTools{Spec: specKey(cfg), Tools: tools}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return
	}
	if err := safefs.MkdirAll(c.root(), filepath.Dir(c.path), 0o755); err == nil {
		_ = safefs.WriteFile(c.root(), c.path, append(b, '\n'), 0o644)
	}
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
