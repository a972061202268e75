package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/capname"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/panics"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/routing"
	"github.com/pml-dev/pml/internal/termsafe"
)

// A tool whose namespace nothing local knows and the cloud does not run is
// looked up in the registries as the MCP server pml.mcp.<namespace>.server
// (seed 004): a stdio entry becomes a pooled server like one from mcps, an
// http entry is forwarded to the cloud, a deno entry is code for
// `pml run`. Every fetched entry is checked against .pml/mcp.lock: a
// changed one is an "integrity" approval, never a silent update.

// registryOrg and registryProject prefix the FQDNs of MCP servers.
const registryPrefix = "pml.mcp."

// Registry is the broker's view of the registries and the lockfile. It
// holds what it uses, never the *Broker. Safe for concurrent use.
type Registry struct {
	client  *registry.Client
	lock    *registry.Lockfile
	lockErr error

	sb  Sandbox
	ws  string
	cfg *config.Config
	log zerolog.Logger
	// cloud is where an http entry's tools go (and whether cloud mode is
	// on: registry lookups are then allowed).
	cloud *Cloud
	// servers are where a stdio entry's server goes (and the tool table).
	servers *Servers
	// perms is the permissions in force (the lockfile keeps an entry
	// whose namespace they do not deny).
	perms Permissions
	// grants are what the person granted registry entries.
	grants *Grants
	// deno lists a deno entry's functions as tools of its namespace
	// (Capabilities.ListEntry: NewCapabilities sets it).
	denoLister interface {
		ListEntry(e *registry.Entry, namespace string) []string
	}
	// Ask describes an approval (approve.Approver); BelowAudit is the
	// request path below the audit layer: an approved integrity change
	// runs its call through it again. Both set in New once built, before
	// any call.
	Ask        Approvals
	BelowAudit call.Handler

	mu sync.Mutex
	// missing remembers namespaces no registry has, so a session does not
	// ask again for every call of an unknown tool.
	missing map[string]error
	// deno holds fetched deno entries by namespace.
	deno map[string]*registry.Entry
}

// RegistryOptions are what NewRegistry is given.
type RegistryOptions struct {
	Sandbox     Sandbox
	Config      *config.Config
	Log         zerolog.Logger
	Cloud       *Cloud
	Servers     *Servers
	Permissions Permissions
	Grants      *Grants
}

// NewRegistry opens the registries' client and the lockfile (dropping
// the entries of denied namespaces); it contacts no registry.
func NewRegistry(o RegistryOptions) *Registry {
	r := &Registry{sb: o.Sandbox, ws: o.Sandbox.Workspace(), cfg: o.Config, log: o.Log, cloud: o.Cloud, servers: o.Servers, perms: o.Permissions, grants: o.Grants}
	r.setup()
	return r
}

// setup opens the registries' client and the lockfile.
func (r *Registry) setup() {
	r.missing = map[string]error{}
	r.deno = map[string]*registry.Entry{}
	client, err := registry.New(registry.Options{Registries: r.cfg.Registries, CacheDir: registry.CacheDir(r.ws)})
	if err != nil {
		r.lockErr = err
		return
	}
	r.client = client
	// An entry goes when its whole namespace is denied. Anything else is
	// still allowed or asked (a tool no pattern names is asked): dropping
	// its record would make the next fetch "new" and trust a changed entry
	// without asking.
	lock, err := registry.LoadLockfileKeeping(registry.LockfilePath(r.ws), func(ns string) bool {
		d, _ := r.perms.Decide(ns + ":*")
		return d != call.Deny
	})
	if err != nil {
		r.lockErr = err
		r.log.Error().Err(err).Msg("the lockfile cannot be read; registry tools are unavailable until it is fixed or removed")
		return
	}
	r.lock = lock
	if removed := lock.Removed(); len(removed) > 0 {
		r.log.Info().Strs("entries", removed).Msg("removed lockfile entries that no permission allows or asks any more")
	}
	if note := lock.UnvouchedNote(); note != "" {
		r.log.Warn().Msg(note)
	}
}

// fqdnFor is the registry name of the MCP server behind a tool.
func fqdnFor(tool string) string {
	return registryPrefix + routing.Namespace(tool) + ".server"
}

// Lookups reports whether an unknown tool may be looked up in the
// registries: they were configured, or cloud mode is on. In local mode
// with the default registry (the cloud) pml contacts nothing on its own;
// `pml add` still may, since the user asks for it.
func (r *Registry) Lookups() bool {
	return r.client != nil && (r.cfg.RegistriesSet || r.cloud.Client.Enabled())
}

// Resolvable reports whether a tool that is not registered (yet) can
// still be called: a configured server's, a cloud tool, or one a registry
// may provide. Anything else is the SDK's "unknown tool" protocol error.
func (r *Registry) Resolvable(name string) bool {
	if r.servers.HasTool(name) {
		return false
	}
	return r.servers.ServerOf(name) != nil || r.cloud.IsCloudTool(name) || RegistryCandidate(name) && r.Lookups()
}

// RegistryCandidate reports whether a tool name may be resolved through
// the registries: it has a namespace that is not built in.
func RegistryCandidate(tool string) bool {
	ns, action, ok := strings.Cut(tool, ":")
	if !ok || ns == "" || action == "" {
		return false
	}
	switch ns {
	case "filesystem", "shell", "pml":
		return false
	}
	_, err := registry.ParseFQDN(registryPrefix + ns + ".server")
	return err == nil
}

// FetchChecked fetches an entry (the cached copy, with a warning, when no
// registry answers) and checks it against the lockfile: a first fetch is
// recorded there, a changed entry comes back with a StatusMismatch
// verdict and nothing recorded. Errors wrap ErrNotFound (no registry has
// it; registry.ErrNotFound too) or ErrUnavailable.
func (r *Registry) FetchChecked(ctx context.Context, fqdn string) (*registry.Entry, registry.Verdict, error) {
	if r.client == nil || r.lock == nil {
		return nil, registry.Verdict{}, fmt.Errorf("%w: the registries cannot be used: %v", call.ErrUnavailable, r.lockErr)
	}
	e, err := r.client.Fetch(ctx, fqdn)
	if err != nil {
		if errors.Is(err, registry.ErrNotFound) {
			return nil, registry.Verdict{}, fmt.Errorf("%w: %w", call.ErrNotFound, err)
		}
		return nil, registry.Verdict{}, fmt.Errorf("%w: %w", call.ErrUnavailable, err)
	}
	if e.FromCache {
		r.log.Warn().Str("fqdn", e.FQDN).Msg(e.Warning)
	}
	v, err := r.lock.Check(e)
	if err != nil {
		return nil, v, fmt.Errorf("checking %s against %s: %v", e.FQDN, r.lock.Path(), err)
	}
	if v.Status == registry.StatusNew {
		r.log.Info().Str("fqdn", e.FQDN).Str("integrity", e.Integrity).Msg("recorded in the lockfile")
	}
	return e, v, nil
}

// Resolve fetches the entry behind tool and makes it callable.
// When the entry changed since it was locked, it returns a workflow-ready
// integrity change instead (change != nil) and makes nothing callable.
func (r *Registry) Resolve(ctx context.Context, tool string) (change *IntegrityChange, err error) {
	ns := routing.Namespace(tool)
	r.mu.Lock()
	prev, known := r.missing[ns]
	r.mu.Unlock()
	if known {
		return nil, prev
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	fqdn := fqdnFor(tool)
	e, v, err := r.FetchChecked(fctx, fqdn)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		nf := fmt.Errorf("%w %q: nothing local provides it and no registry has %s (%v); tools/list (`pml tools` on the command line) shows the available tools", call.ErrNotFound, tool, fqdn, strings.TrimPrefix(err.Error(), call.ErrNotFound.Error()+": "))
		r.mu.Lock()
		r.missing[ns] = nf
		r.mu.Unlock()
		return nil, nf
	case err != nil:
		return nil, fmt.Errorf("%s needs the registry entry %s: %w", tool, fqdn, err)
	case v.Status == registry.StatusMismatch:
		return &IntegrityChange{entry: e, verdict: v}, nil
	}
	return nil, r.useEntry(e, tool)
}

// LoadServers makes the stdio servers this workspace fetched in
// earlier sessions (the lockfile's entries) known again, so tools/list
// shows their tools. A registry that does not answer within a few seconds
// leaves them to the first call; an entry that changed stays unlisted
// until a call asks about it.
func (r *Registry) LoadServers(ctx context.Context) {
	if r.lock == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for name, e := range r.lock.Entries() {
		f, err := registry.ParseFQDN(name)
		if err != nil || e.Type != registry.TypeStdio || r.servers.ServerOf(f.Namespace+":") != nil || !RegistryCandidate(f.Namespace+":"+f.Action) {
			continue
		}
		if name != fqdnFor(f.Namespace+":") {
			continue
		}
		wg.Add(1)
		go panics.Guarded(r.log, "tools/list", "loading the locked registry server "+name, func() {
			defer wg.Done()
			if _, err := r.Resolve(ctx, f.Namespace+":"+f.Action); err != nil {
				r.log.Info().Err(err).Str("fqdn", name).Msg("a locked registry server is not listed")
			}
		})
	}
	wg.Wait()
}

// IntegrityChange is a fetched entry that differs from the locked one.
type IntegrityChange struct {
	entry   *registry.Entry
	verdict registry.Verdict
}

// useEntry makes a verified entry callable.
func (r *Registry) useEntry(e *registry.Entry, tool string) error {
	ns := routing.Namespace(tool)
	switch e.Type {
	case registry.TypeStdio:
		cfg, err := registry.ServerConfig(e)
		if registry.WantsWritable(e) {
			r.log.Warn().Msg(registry.RWRefused(e))
		}
		if err != nil {
			return err
		}
		r.servers.Add(cfg)
		return nil
	case registry.TypeHTTP:
		// An http server runs in the cloud, with the user's keys.
		// Its variables leave the machine only as the person granted
		// (registry_grant.go): the grant is what its calls would send.
		r.cloud.useEntry(e, ns, tool)
		return nil
	case registry.TypeDeno:
		// Its exported functions become tools, like an added capability's.
		r.denoLister.ListEntry(e, ns)
		if !r.servers.HasTool(tool) {
			_, fn, _ := strings.Cut(tool, ":")
			return fmt.Errorf("%w %q: the deno capability %s exports no function %s", call.ErrNotFound, tool, e.FQDN, fn)
		}
		return nil
	}
	return fmt.Errorf("%s: registry entry %s has the unknown type %q", tool, e.FQDN, e.Type)
}

// IntegrityApproval describes a changed registry entry for a person.
func (r *Registry) IntegrityApproval(wf *workflow.Workflow) workflow.Approval {
	a := r.Ask.Approval(wf)
	ch, _ := wf.Data.(*IntegrityChange)
	if ch == nil {
		return a
	}
	v := ch.verdict
	oldHash, _ := registry.HashOf(v.Old.Integrity)
	newHash, _ := registry.HashOf(v.New.Integrity)
	// The verdict names what the registry said: quoted, bounded.
	a.Description = termsafe.Quote(v.Description(), 4*termsafe.DefaultMax) + " Continue trusts the new version (and updates " + filepath.Join(".pml", "mcp.lock") + "); abort keeps the old one and runs nothing."
	a.Options = []string{"continue", "abort"}
	a.Context = map[string]any{
		"fqdn":           v.Name,
		"old_hash":       oldHash,
		"new_hash":       newHash,
		"old_integrity":  v.Old.Integrity,
		"new_integrity":  v.New.Integrity,
		"old_fetched_at": v.Old.FetchedAt,
		"new_fetched_at": v.New.FetchedAt,
		"registry":       ch.entry.Registry,
		"type":           ch.entry.Type,
	}
	// What the new version's container would get, as for any approval
	// (access.go): its image, workspace access, variable names, network.
	if cfg, err := registry.ServerConfig(ch.entry); err == nil {
		acc := r.Ask.ServerAccess(cfg)
		acc.Limits = r.sb.LimitsNote(context.Background())
		a.Description += approve.AccessSentence(acc, a.Context)
	}
	return a
}

// ApproveIntegrity trusts the new version, then runs the call through the
// whole request path again (it may still need a permission or an
// install), below the audit layer: the call's one audit entry is the
// outcome of that run, with the approval as its reason when it has none.
func (r *Registry) ApproveIntegrity(ctx context.Context, c *call.Call, wfs *workflow.Workflows, wf *workflow.Workflow) call.Result {
	ch, _ := wf.Data.(*IntegrityChange)
	if ch == nil {
		return call.ResultFor(fmt.Errorf("workflow %s has no integrity change attached", wf.ID))
	}
	if err := r.lock.Approve(ch.entry); err != nil {
		return call.ResultFor(fmt.Errorf("could not update %s: %v; nothing was run", r.lock.Path(), err))
	}
	r.log.Info().Str("fqdn", ch.entry.FQDN).Str("integrity", ch.entry.Integrity).Msg("integrity change approved; lockfile updated")
	if err := r.useEntry(ch.entry, wf.Tool); err != nil {
		return call.ResultFor(err)
	}
	args, _ := json.Marshal(wf.Args)
	again := call.NewCall(call.Request{Tool: wf.Tool, Args: args, Workflows: wfs}.Within(c.Req))
	again.Began = c.Began
	res := r.BelowAudit.Call(ctx, again)
	if e, ok := again.Noted(); ok {
		if e.Reason == "" {
			e.Reason = "integrity change approved"
		}
		c.Note(e)
	}
	return res
}

// resolveVersion turns a name's semantic version or range into the
// 5-part FQDN to fetch (registry.Resolve: a locked version that still
// matches is kept; else the highest listed).
func (r *Registry) resolveVersion(ctx context.Context, ref capname.Ref) (string, error) {
	if r.client == nil || r.lock == nil {
		return "", fmt.Errorf("%w: the registries cannot be used: %v", call.ErrUnavailable, r.lockErr)
	}
	fqdn, _, err := registry.Resolve(ctx, r.client, r.lock, ref)
	switch {
	case err == nil:
		return fqdn, nil
	case errors.Is(err, registry.ErrNotFound):
		return "", fmt.Errorf("%w: %w", call.ErrNotFound, err)
	case ctx.Err() != nil:
		return "", err
	}
	return "", fmt.Errorf("%w: %w", call.ErrUnavailable, err)
}
