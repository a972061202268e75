package tools

import (
	"fmt"
	"net/url"
	"path/filepath"
	"sync"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/entrygrant"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/trust"
)

// What a registry entry gets of this machine — the values of host
// variables (a stdio server's envRequired, an http entry's env_required
// sent as X-Pml-Byok-* headers), the hosts a server's network names or an
// http entry's keys go to (cloud.url, proxy_to), an image of the entry's
// choice — is a grant of its own, not a part of the tool's permission: an
// allow pattern (even "*") lets a call run, never lets a registry decide
// which of the person's secrets leave the machine. It is put to the person
// (ApprovalRegistryGrant) before the entry's first start or call and again
// after any change that asks for more, whatever the tool's permission, or
// given on the command line (pml add, which shows it). The record lives in
// the user's state directory beside the trust records
// (internal/entrygrant), where no repository, container or model writes.
// A server declared in .pml.json's mcps is the person's own (trusted with
// the file) and needs none.

// Grants is the broker's view of the record: the store, the
// workspace it is keyed by, and the grants this process has seen covered
// (a call of a granted server does not read the file again).
type Grants struct {
	store *entrygrant.Store
	ws    string
	log   zerolog.Logger

	mu sync.Mutex
	ok map[string]entrygrant.Grant // namespace → the want found covered
}

// NewGrants opens the record beside the trust store ts; without a
// place for it (no HOME, a unit test) grants last for the process.
func NewGrants(ts *trust.Store, ws string, log zerolog.Logger) *Grants {
	store := entrygrant.Memory()
	if ts != nil && filepath.IsAbs(ts.Path) {
		store = entrygrant.Open(filepath.Dir(ts.Path))
	}
	return &Grants{store: store, ws: ws, log: log, ok: map[string]entrygrant.Grant{}}
}

// Granted reports whether want is covered by what the person granted.
func (g *Grants) Granted(want entrygrant.Grant) bool {
	want = want.Normal()
	if want.Empty() {
		return true
	}
	g.mu.Lock()
	seen, ok := g.ok[want.Namespace]
	g.mu.Unlock()
	if ok && seen.Covers(want) {
		return true
	}
	yes, err := g.store.Granted(g.ws, want)
	if err != nil {
		g.log.Error().Err(err).Str("namespace", want.Namespace).Msg("the registry grants cannot be read: the entry is asked about as if nothing were granted")
	}
	if yes {
		g.mu.Lock()
		g.ok[want.Namespace] = want
		g.mu.Unlock()
	}
	return yes
}

// Record saves want as granted by the person.
func (g *Grants) Record(want entrygrant.Grant) error {
	want = want.Normal()
	if err := g.store.Record(g.ws, want); err != nil {
		return err
	}
	g.mu.Lock()
	g.ok[want.Namespace] = want
	g.mu.Unlock()
	g.log.Info().Str("namespace", want.Namespace).Strs("env", want.Env).Strs("hosts", want.Hosts).Str("image", want.Image).Msg("registry entry granted")
	return nil
}

// CheckServer refuses to start a registry server whose grant the person
// has not given: the last guard before its container gets the values of
// host variables and its network (a tools/list loading a locked server,
// any path that did not ask first).
func (g *Grants) CheckServer(cfg config.Server) error {
	if !cfg.FromRegistry {
		return nil
	}
	want := serverGrant(cfg)
	if g.Granted(want) {
		return nil
	}
	return fmt.Errorf("%w: the MCP server %s comes from a registry and asks for what nobody granted it here: %s; no container was started. "+
		"Call one of its tools to be asked (the approval names all of it), or add it with `pml add`, which shows it",
		ErrRefused, cfg.Name, ShownGrant(want))
}

// serverGrant is what a registry stdio server gets of this machine: the
// values of its envRequired variables (pml's own never), its network's
// hosts, and its image when the entry chose it (not pml's node image of
// an npm/npx entry).
func serverGrant(cfg config.Server) entrygrant.Grant {
	g := entrygrant.Grant{Namespace: cfg.Name, Entry: fqdnFor(cfg.Name + ":"), Kind: registry.TypeStdio}
	for _, v := range cfg.EnvRequired {
		if !config.OwnVariable(v) {
			g.Env = append(g.Env, v)
		}
	}
	if !cfg.Network.Empty() {
		g.Hosts = cfg.Network.Rules.Strings()
	}
	if cfg.Image != registry.NodeImage {
		g.Image = cfg.Image
	}
	return g.Normal()
}

// httpGrant is what an http ("cloud") entry's calls send: the values of
// its env_required variables to the cloud.url host, which forwards them to
// the proxy_to host.
func httpGrant(e *registry.Entry, ns, cloudURL string) entrygrant.Grant {
	g := entrygrant.Grant{Namespace: ns, Entry: fqdnFor(ns + ":"), Registry: e.Registry, Kind: registry.TypeHTTP}
	if e.Meta == nil {
		return g
	}
	for _, v := range e.Meta.AllEnvRequired() {
		if !config.OwnVariable(v) {
			g.Env = append(g.Env, v)
		}
	}
	g.Hosts = []string{hostOf(cloudURL), hostOf(e.Meta.ProxyTo)}
	return g
}

// hostOf is a URL's host[:port] as a person reads it ("" URLs: "?").
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "?"
	}
	return u.Host
}

// ShownGrant is a grant as an approval or a message tells it: names
// only, quoted (they come from a registry).
func ShownGrant(g entrygrant.Grant) string {
	return termsafe.Quote(g.Describe(), 4*termsafe.DefaultMax)
}

// wantedGrant is what tool's registry entry asks of this machine; ok is
// false for a tool of no registry entry (a server of .pml.json, the
// toolbox, the cloud's own list).
func (r *Registry) wantedGrant(tool string) (entrygrant.Grant, bool) {
	if srv := r.servers.ServerOf(tool); srv != nil {
		if !srv.Cfg.FromRegistry {
			return entrygrant.Grant{}, false
		}
		return serverGrant(srv.Cfg), true
	}
	return r.cloud.RegGrantOf(tool)
}

// GrantNeeded is the approve layer's GrantNeeded: the grant tool's entry
// asks for, when the person has not given it.
func (r *Registry) GrantNeeded(tool string) (any, bool) {
	g, ok := r.wantedGrant(tool)
	if !ok || r.grants.Granted(g) {
		return nil, false
	}
	return grantAsked(g), true
}

// grantAsked is g as the workflow's Data. (A function of its own: the
// copy that goes to the heap is taken only when a grant is needed, not
// on every call's GrantNeeded.)
func grantAsked(g entrygrant.Grant) any { return &g }

// GrantApproval describes a registry grant for a person: the entry, the
// variables (names only) and where they go, the network and the image,
// then the call (and the install, when one is due) as its own approval
// would.
func (r *Registry) GrantApproval(wf *workflow.Workflow) workflow.Approval {
	var a workflow.Approval
	if srv := r.servers.ServerOf(wf.Tool); srv != nil && srv.Cfg.Install != nil && !r.servers.Deps.Installed(srv.Cfg) {
		a = r.Ask.DependencyApproval(wf, srv.Cfg)
	} else {
		a = r.Ask.Approval(wf)
	}
	g, _ := wf.Data.(*entrygrant.Grant)
	if g == nil {
		return a
	}
	where := "in " + r.grants.Path()
	if r.grants.Path() == "" {
		where = "for this session only (pml has no state directory: set HOME or XDG_STATE_HOME)"
	}
	a.Description = fmt.Sprintf("%s comes from the registry entry %s, which asks for more than the tool's permission gives: %s. "+
		"None of it is given until you grant it here; pml records the grant %s and asks again when the entry asks for more. ",
		termsafe.Quote(wf.Tool, termsafe.DefaultMax), termsafe.Quote(g.Entry, termsafe.DefaultMax), ShownGrant(*g), where) + a.Description
	a.Options = []string{"continue", "abort"}
	if a.Context == nil {
		a.Context = map[string]any{}
	}
	a.Context["always_not_offered"] = "continue records the grant itself; the tool's own permission is not what is asked here"
	a.Context["entry"] = g.Entry
	a.Context["grant_kind"] = g.Kind
	a.Context["grant_env"] = append([]string{}, g.Env...)
	a.Context["grant_hosts"] = append([]string{}, g.Hosts...)
	a.Context["grant_image"] = g.Image
	if g.Registry != "" {
		a.Context["registry"] = g.Registry
	}
	return a
}

// RecordGrant records an approved registry grant as the person's.
func (r *Registry) RecordGrant(wf *workflow.Workflow) error {
	g, ok := wf.Data.(*entrygrant.Grant)
	if !ok || g == nil {
		return fmt.Errorf("workflow %s carries no registry grant", wf.ID)
	}
	return r.grants.Record(*g)
}

// Path is where the grants are recorded ("": for this process only).
func (g *Grants) Path() string { return g.store.Path }
