package tools

import (
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/entrygrant"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/routing"
)

// What broker's whole-broker tests reach of the sources, which they
// cannot otherwise see from another package. Nothing of pml calls these.

// Router is the cloud's routing table.
func (c *Cloud) Router() *routing.Router { return c.router }

// Ready closes when the first refresh after StartCloud has ended.
func (c *Cloud) Ready() <-chan struct{} { return c.ready }

// SetEntryForTest makes tool a registry http entry's, sending env and
// needing grant g.
func (c *Cloud) SetEntryForTest(tool string, g entrygrant.Grant, env []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.regGrant[tool], c.regEnv[tool] = g, env
}

// SetDenoForTest holds e as the deno entry of namespace ns.
func (r *Registry) SetDenoForTest(ns string, e *registry.Entry) { r.setDeno(ns, e) }

// SetLogForTest sends the servers' (and the capabilities') log lines to l;
// before any call.
func (s *Servers) SetLogForTest(l zerolog.Logger)       { s.log = l }
func (cs *Capabilities) SetLogForTest(l zerolog.Logger) { cs.log = l }

// SetStoreForTest records the grants in st.
func (g *Grants) SetStoreForTest(st *entrygrant.Store) { g.store = st }

// StoreForTest is where the grants are recorded.
func (g *Grants) StoreForTest() *entrygrant.Store { return g.store }
