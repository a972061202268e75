package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/internal/capname"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/entrygrant"
	"github.com/pml-dev/pml/internal/lazyre"
	"github.com/pml-dev/pml/internal/mcpname"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/toolbox"
)

// Standalone capabilities (seed 000, story 14.10): `pml add NAME` fetches a
// registry entry once, locks it, installs what it needs and records it in
// .pml/capabilities.json; `pml run NAME` then serves just its tools as an
// MCP server, offline.

// CapabilitiesFile records the added capabilities, relative to the
// workspace.
const CapabilitiesFile = ".pml/capabilities.json"

// Capability is one added registry entry.
type Capability struct {
	// Name is what the user typed (without @version): the .mcp.json key.
	Name string `json:"name"`
	// FQDN is the locked 5-part name; Version its semantic version, when
	// the registry gave one.
	FQDN      string `json:"fqdn"`
	Version   string `json:"version,omitempty"`
	Type      string `json:"type"`
	Routing   string `json:"routing"`
	Namespace string `json:"namespace"`
	// Tools are the tool names the capability offers, without namespace.
	Tools       []string  `json:"tools,omitempty"`
	EnvRequired []string  `json:"env_required,omitempty"`
	Description string    `json:"description,omitempty"`
	AddedAt     time.Time `json:"added_at"`
	// Requires are the servers its mcp_deps name (capability_deps.go).
	Requires []Requirement `json:"requires,omitempty"`
	// Replaced are the names this add took the place of: the same
	// registry entry recorded under another spelling (smartSearch,
	// smartsearch, pml.mcp.smartsearch.server), so that one entry is one
	// record. Not stored.
	Replaced []string `json:"-"`
	// Vouch is the user's MAC over the record (internal/vouch;
	// capability_vouch.go): a record pml add did not write here is not
	// listed.
	Vouch string `json:"vouch,omitempty"`
	// Grant is what it gets of this machine (host variables and where
	// they go, network, image), as the person granted it in pml add
	// (registry_grant.go); nil when it asks for nothing. Never read from
	// the workspace's file: the grant's record is the person's.
	Grant *entrygrant.Grant `json:"-"`
}

// CapabilityFQDN reads what `pml add` was given, as the seeds write it
// (internal/capname: smartSearch, db.postgres_query,
// casys.pml.myCapability, a 4- or 5-part FQDN; @latest, @3f2a, @1.2.0,
// @^1.2). The FQDN has the hash of an @hash; a semantic version is
// resolved by AddCapability.
func CapabilityFQDN(arg string) (capname.Ref, registry.FQDN, error) {
	ref, err := capname.Parse(arg)
	if err != nil {
		return ref, registry.FQDN{}, err
	}
	f, err := registry.ParseFQDN(ref.FQDN())
	if err != nil {
		return ref, f, err
	}
	if builtinNamespace(f.Namespace) {
		return ref, f, fmt.Errorf("%q names the built-in namespace %q; it needs no pml add", arg, f.Namespace)
	}
	return ref, f, nil
}

// builtinNamespace reports whether ns is one of pml's own: no capability
// may take it (pml add refuses it; load drops a record that has it).
func builtinNamespace(ns string) bool {
	return slices.Contains(builtinNamespaces, strings.ToLower(ns)) // capability_namespace.go
}

// Confirm asks the person running `pml add` to approve something (an
// integrity change, an install with network access). false refuses.
type Confirm func(Approval) bool

// ErrRefused: the person (or the lack of a terminal) said no to an
// approval `pml add` needed.
var ErrRefused = errors.New("not approved")

// capabilities adds capabilities (`pml add`) and makes their tools
// callable (`pml run`). It holds what it uses, never the *Broker: the
// functions of the servers, the tool table and the approval texts are
// wired in New.
type capabilities struct {
	registry *registrySide
	cloud    *cloudSide
	sb       *sandbox
	log      zerolog.Logger
	// runs starts a deno capability's function in a Deno container.
	runs *codeRuns
	// deps is the store of installed server dependencies.
	deps *deps.Store
	// serverOf, addServer and install are the servers'; replaceTools
	// the tool table's; dependencyApproval describes an install
	// (approval_text.go).
	serverOf           func(tool string) *server
	addServer          func(cfg config.Server) *server
	install            func(ctx context.Context, srv *server) error
	replaceTools       func(old []string, defs []toolbox.Tool, exec executor) []string
	dependencyApproval func(wf *Workflow, srv config.Server) Approval
	// added is what pml stdio lists of the added capabilities
	// (capability_tools.go).
	added        addedTools
	serverAccess func(cfg config.Server) approve.Access
	// serverList is the servers' (capability_namespace.go).
	serverList func() []*server
}

// AddCapability fetches, locks, installs and records a capability.
func (b *Broker) AddCapability(ctx context.Context, arg string, confirm Confirm) (Capability, error) {
	return b.caps.AddCapability(ctx, arg, confirm)
}

// AddCapability is Broker.AddCapability.
func (cs *capabilities) AddCapability(ctx context.Context, arg string, confirm Confirm) (c Capability, err error) {
	ref, f, err := CapabilityFQDN(arg)
	if err != nil {
		return Capability{}, fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	name, fqdn := ref.Name, f.String()
	// Before anything is fetched or locked: a namespace taken here
	// (capability_namespace.go) is refused whatever the entry holds.
	added, err := LoadCapabilities(cs.sb.Workspace)
	if err != nil {
		return Capability{}, err
	}
	if refs := cs.registry.cfg.Capabilities; len(refs) > 0 && cs.registry.lock != nil {
		// Those .pml.json names that a session fetched and pinned.
		named, _ := namedCapabilities(refs, added, cs.registry.lock)
		for n, c := range named {
			added[n] = c
		}
	}
	if err := cs.namespaceTaken(name, f.Namespace, fqdn, added); err != nil {
		return Capability{}, err
	}
	if ref.NeedsListing() {
		if fqdn, err = cs.registry.resolveVersion(ctx, ref); err != nil {
			return Capability{}, err
		}
	}
	e, v, err := cs.registry.fetchChecked(ctx, fqdn)
	if err != nil {
		return Capability{}, err
	}
	if v.Status == registry.StatusNew {
		// Recorded by this fetch: an add that then fails or is refused
		// takes it back, or every later session would fetch (and offer)
		// an entry nobody accepted (issue 50).
		defer func() {
			if err != nil {
				if ferr := cs.registry.lock.Forget(e); ferr != nil {
					err = fmt.Errorf("%w; and %s stays in %s: %v", err, e.FQDN, cs.registry.lock.Path(), ferr)
				}
			}
		}()
	}
	if v.Status == registry.StatusMismatch {
		a := Approval{ApprovalRequired: true, ApprovalType: ApprovalIntegrity, Tool: f.Tool(), Description: v.Description(), Options: []string{"continue", "abort"}}
		if !confirm(a) {
			return Capability{}, fmt.Errorf("%w: %s changed since it was locked; the lockfile is unchanged", ErrRefused, v.Name)
		}
		if err := cs.registry.lock.Approve(e); err != nil {
			return Capability{}, err
		}
	}
	ef, _ := registry.ParseFQDN(e.FQDN)
	c = Capability{Name: name, FQDN: e.FQDN, Version: e.Version, Type: e.Type, Routing: e.Routing, Namespace: ef.Namespace, AddedAt: time.Now().UTC().Truncate(time.Second)}
	if e.Meta != nil {
		c.Description = e.Meta.Description
		c.EnvRequired = e.Meta.AllEnvRequired()
		for _, t := range e.Meta.Tools {
			// Printed by pml add: a name outside MCP's rule is no tool
			// pml lists (capability_tools.go).
			if _, action, ok := strings.Cut(t, ":"); ok && mcpname.Tool(action) == nil {
				c.Tools = append(c.Tools, action)
			}
		}
	}
	if err := cs.readyCapability(ctx, e, &c, confirm); err != nil {
		return Capability{}, err
	}
	if c.Replaced, err = saveCapability(cs.sb.Workspace, c); err != nil {
		return Capability{}, err
	}
	return c, nil
}

// readyCapability readies what a capability of e's type needs here: a
// stdio server is added and (once confirmed) installed, a deno module
// must export a function, an http one needs the cloud.
func (cs *capabilities) readyCapability(ctx context.Context, e *registry.Entry, c *Capability, confirm Confirm) error {
	switch e.Type {
	case registry.TypeStdio:
		cfg, err := registry.ServerConfig(e)
		if registry.WantsWritable(e) {
			cs.log.Warn().Msg(registry.RWRefused(e))
		}
		if err != nil {
			return err
		}
		if err := cs.confirmGrant(e, serverGrant(cfg), c, confirm); err != nil {
			return err
		}
		srv := cs.addServer(cfg)
		if cfg.Install != nil && !cs.deps.Installed(cfg) {
			wf := &Workflow{Type: ApprovalDependency, Tool: cfg.Name + ":*"}
			if !confirm(cs.dependencyApproval(wf, srv.cfg)) {
				return fmt.Errorf("%w: installing %s was not approved; nothing was installed", ErrRefused, cfg.Name)
			}
			if err := cs.install(ctx, srv); err != nil {
				return err
			}
		}
	case registry.TypeDeno:
		c.Tools = nil
		for _, fn := range ExportedFunctions(e.Code, e.FQDN) {
			if mcpname.Tool(fn) == nil {
				c.Tools = append(c.Tools, fn)
			}
		}
		if len(c.Tools) == 0 {
			return fmt.Errorf("%s exports no function, so it has no tool to offer", e.FQDN)
		}
	case registry.TypeHTTP:
		if err := cs.confirmGrant(e, httpGrant(e, c.Namespace, cs.cloud.client.URL), c, confirm); err != nil {
			return err
		}
		if !cs.cloud.client.Enabled() {
			cs.log.Warn().Msg(c.Name + " runs in the PML cloud: set PML_API_KEY to use it")
		}
	}
	return cs.readyDeps(ctx, e, c, confirm)
}

// confirmGrant puts what the entry asks of this machine to the person
// running pml add (unless granted already) and records it: the same
// grant a call would ask for, so the tools then run without that
// question. Refused, nothing is added.
func (cs *capabilities) confirmGrant(e *registry.Entry, g entrygrant.Grant, c *Capability, confirm Confirm) error {
	g.Registry = e.Registry
	g = g.Normal()
	if g.Empty() {
		return nil
	}
	c.Grant = &g
	if cs.sb.grants.granted(g) {
		return nil
	}
	where := "in " + cs.sb.grants.store.Path
	if cs.sb.grants.store.Path == "" {
		where = "for this process only (pml has no state directory: set HOME or XDG_STATE_HOME)"
	}
	a := Approval{ApprovalRequired: true, ApprovalType: ApprovalRegistryGrant, Tool: c.Namespace + ":*",
		Description: fmt.Sprintf("%s (the registry entry %s from %s) asks for more than a tool's permission gives: %s. Grant it? pml records the grant %s and asks again if the entry asks for more.",
			termsafe.Quote(c.Name, termsafe.DefaultMax), termsafe.Quote(e.FQDN, termsafe.DefaultMax), termsafe.Quote(e.Registry, termsafe.DefaultMax), shownGrant(g), where),
		Options: []string{"continue", "abort"},
		Context: map[string]any{"entry": g.Entry, "grant_kind": g.Kind, "grant_env": g.Env, "grant_hosts": g.Hosts, "grant_image": g.Image, "registry": e.Registry}}
	if !confirm(a) {
		return fmt.Errorf("%w: %s was not added: what it asks for (%s) was not granted", ErrRefused, c.Name, shownGrant(g))
	}
	return cs.sb.grants.record(g)
}

var (
	exportFn      = lazyre.New(`(?m)^\s*export\s+(?:async\s+)?function\s*\*?\s*([A-Za-z_$][A-Za-z0-9_$]*)\s*\(`)
	exportArrow   = lazyre.New(`(?m)^\s*export\s+(?:const|let|var)\s+([A-Za-z_$][A-Za-z0-9_$]*)\s*=\s*(?:async\s+)?(?:function\b|\(|[A-Za-z_$][A-Za-z0-9_$]*\s*=>)`)
	exportDefault = lazyre.New(`(?m)^\s*export\s+default\s+(?:async\s+)?(?:function\b|\(|[A-Za-z_$][A-Za-z0-9_$]*\s*=>)`)
)

// ExportedFunctions lists the functions a deno capability exports (each
// becomes a tool): `export function f`, `export const f = (…) =>`, and a
// default export (`export default (args) => …`, as docs/capabilities.md
// writes a one-function capability), which is the tool named by the
// entry's action (fqdn: acme.tools.text.upper → upper). The runner is
// told which export runs a tool by exportFor.
func ExportedFunctions(code, fqdn string) []string {
	var out []string
	seen := map[string]bool{}
	for _, re := range []*lazyre.Regexp{exportFn, exportArrow} {
		for _, m := range re.FindAllStringSubmatch(code, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				out = append(out, m[1])
			}
		}
	}
	if action := defaultTool(code, fqdn); action != "" && !seen[action] {
		out = append(out, action)
	}
	return out
}

// defaultTool is the tool name of the module's default export: the
// entry's action, or "" when it has no default function export.
func defaultTool(code, fqdn string) string {
	if !exportDefault.MatchString(code) {
		return ""
	}
	f, err := registry.ParseFQDN(fqdn)
	if err != nil {
		return ""
	}
	return f.Action
}

// exportFor is the module export that runs tool function fn: the named
// export, else "default" for the tool of the default export.
func exportFor(code, fqdn, fn string) string {
	for _, re := range []*lazyre.Regexp{exportFn, exportArrow} {
		for _, m := range re.FindAllStringSubmatch(code, -1) {
			if m[1] == fn {
				return fn
			}
		}
	}
	if fn != "" && defaultTool(code, fqdn) == fn {
		return "default"
	}
	return fn
}

type capDoc struct {
	Version      int                   `json:"version"`
	Capabilities map[string]Capability `json:"capabilities"`
}

// LoadCapabilities reads the capabilities pml add recorded in
// .pml/capabilities.json (missing: none): a record without the user's
// vouch, or one pml add would have refused, is left out
// (CheckedCapabilities says why).
func LoadCapabilities(ws string) (map[string]Capability, error) {
	caps, _, err := CheckedCapabilities(ws)
	return caps, err
}

// loadCapabilitiesFile reads .pml/capabilities.json as it is, every record.
func loadCapabilitiesFile(ws string) (map[string]Capability, error) {
	path := filepath.Join(ws, CapabilitiesFile)
	data, err := safefs.ReadFile(ws, path, safefs.MaxConfig)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]Capability{}, nil
	}
	if err != nil {
		return nil, err
	}
	var d capDoc
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON (%v): fix or remove it, then pml add again", path, err)
	}
	if d.Capabilities == nil {
		d.Capabilities = map[string]Capability{}
	}
	return d.Capabilities, nil
}

func writeCapabilities(ws string, caps map[string]Capability) error {
	path := filepath.Join(ws, CapabilitiesFile)
	data, err := json.MarshalIndent(capDoc{Version: 1, Capabilities: caps}, "", "  ")
	if err != nil {
		return err
	}
	if err := safefs.MkdirAll(ws, filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return safefs.WriteFile(ws, path, append(data, '\n'), 0o644)
}

// saveCapability records c under its name, in place of every record of
// the same registry entry (its 4-part name) under another spelling: one
// entry added as smartSearch, smartsearch and pml.mcp.smartsearch.server
// is one record, the last one added (issue 50). It returns the names it
// replaced.
func saveCapability(ws string, c Capability) ([]string, error) {
	caps, err := loadCapabilitiesFile(ws)
	if err != nil {
		return nil, err
	}
	var replaced []string
	if f, err := registry.ParseFQDN(c.FQDN); err == nil {
		for name, old := range caps {
			if of, err := registry.ParseFQDN(old.FQDN); err == nil && name != c.Name && of.Base() == f.Base() {
				delete(caps, name)
				replaced = append(replaced, name)
			}
		}
	}
	sort.Strings(replaced)
	if c, err = sealCapability(ws, c); err != nil {
		return nil, err
	}
	caps[c.Name] = c
	return replaced, writeCapabilities(ws, caps)
}

// RemoveCapability forgets an added capability; clean also drops its
// cached registry copy. Installed dependencies stay (another capability may
// use them). It reports whether the capability was there.
func RemoveCapability(ws, name string, clean bool) (Capability, bool, error) {
	caps, err := loadCapabilitiesFile(ws)
	if err != nil {
		return Capability{}, false, err
	}
	c, ok := caps[name]
	if !ok {
		return Capability{}, false, nil
	}
	delete(caps, name)
	if err := writeCapabilities(ws, caps); err != nil {
		return c, true, err
	}
	if clean {
		if f, err := registry.ParseFQDN(c.FQDN); err == nil {
			// The cache holds one file per 4-part name.
			_ = safefs.Remove(ws, filepath.Join(registry.CacheDir(ws), f.Base()+".json"))
		}
	}
	return c, true, nil
}

// SortedCapabilities returns the capabilities by name.
func SortedCapabilities(caps map[string]Capability) []Capability {
	out := make([]Capability, 0, len(caps))
	for _, c := range caps {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// prepareCapability makes an added capability's tools callable in this
// process (`pml run`): its locked registry entry is fetched again — the
// cached copy when the registry is unreachable — and checked against the
// lockfile.
func (cs *capabilities) prepareCapability(ctx context.Context, c Capability) {
	others, err := LoadCapabilities(cs.sb.Workspace)
	if err == nil {
		err = cs.namespaceTaken(c.Name, c.Namespace, c.FQDN, others)
	}
	if err != nil {
		cs.log.Warn().Str("capability", c.Name).Msg("the capability is not loaded: " + err.Error())
		return
	}
	tool := c.Namespace + ":" + firstOr(c.Tools, "run")
	if c.Type == registry.TypeDeno {
		cs.registerDenoCapability(ctx, c)
		return
	}
	if cs.serverOf(tool) != nil {
		return
	}
	change, err := cs.registry.resolveFromRegistry(ctx, tool)
	switch {
	case err != nil:
		cs.log.Warn().Err(err).Str("capability", c.Name).Msg("the capability cannot be loaded")
	case change != nil:
		cs.log.Warn().Str("capability", c.Name).Msg(change.verdict.Description() + " Run `pml add " + c.Name + "` to review and approve it.")
	}
}

func firstOr(l []string, def string) string {
	if len(l) > 0 {
		return l[0]
	}
	return def
}
