package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/broker/workflow"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/permit"
	sbx "github.com/pml-dev/pml/broker/sandbox"
	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/inside"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/trust"
	"github.com/pml-dev/pml/policies"
)

// Options configure a Broker.
type Options struct {
	// Workspace is the absolute, symlink-free workspace directory.
	Workspace string
	// ToolPins, when set, replaces the person's pinned tool definitions
	// (internal/toolpin in the state directory): pml lock --check lists
	// the servers through one that records and pins nothing.
	ToolPins tl.Pinner
	Config   *config.Config
	Runtime  container.Runtime
	// Inside gives pml's in-container program (cmd/pml-inside) for the
	// daemon's architecture: the toolbox image is built from it and it
	// is mounted as the shell and Deno supervisor. nil: extracted from
	// this pml (internal/inside) for Runtime's architecture.
	Inside func(context.Context) (inside.Program, error)
	// PullImage gets an image that a container needs and the engine does
	// not have (first use); nil: a missing image fails the call.
	PullImage func(ctx context.Context, ref string) error
	// Owner labels every container (defaults to container.Self()).
	Owner  *container.Owner
	Logger zerolog.Logger
	// Progress, when set, logs the progress of long work (dependency
	// installs, first-use pulls) where Logger is quieter (pml call logs
	// warnings only, yet shows that an install is under way).
	Progress *zerolog.Logger
	// ServerStartTimeout overrides how long a stdio server may take to
	// start and initialize (tests).
	ServerStartTimeout time.Duration
	// HTTPClient talks to the cloud (and registries); nil: a default one.
	HTTPClient *http.Client
	// Trust is the person's record of trusted policy files
	// (internal/trust). Config is .pml.json as read: New, every reload and
	// pml's own writes of .pml.json go through Trust. nil: every policy is
	// taken as trusted (tests of other layers).
	Trust *trust.Store
	// WorkspaceExplicit: the person named the workspace (PML_WORKSPACE),
	// so the client's roots are not compared with it (mcpserve/roots.go).
	WorkspaceExplicit bool
}

// Broker routes and executes tool calls. Safe for concurrent use.
type Broker struct {
	cfg *config.Config
	// pins hold the tools whose definitions drifted from what the person
	// accepted (pins.go; tools/layer_pin.go).
	pins  *tl.ToolPins
	sb    *sandbox
	perms *permit.LivePermissions
	// reload applies edits of .pml.json (reload.go); startStamps are the
	// stamps of the files as New found them.
	reload      reloadState
	startStamps stamps
	// trust is the person's trust records; trustState how the
	// configuration in force stands against them (permit/trust.go).
	trust      *trust.Store
	trustState permit.TrustState
	// wsExplicit: Options.WorkspaceExplicit.
	wsExplicit bool
	log        zerolog.Logger
	progress   zerolog.Logger
	audit      *audit.Log
	// toolbox is the image the filesystem tools run in (pml list asks
	// for its ref).
	toolbox *images.Toolbox

	// srv is the configured stdio servers and the tool table
	// (servers.go).
	srv *tl.Servers

	cloud    *tl.Cloud
	registry *tl.Registry
	// caps adds capabilities and serves their tools; lister answers pml
	// list.
	caps   *tl.Capabilities
	lister *tl.Lister

	// base is cancelled by Close: every running call is cancelled with it,
	// which kills its container; inflight lets Close wait for the cleanup.
	base       context.Context
	cancelBase context.CancelFunc
	inflight   sync.WaitGroup
	// running are the calls in Call, cancelled with base (running.go).
	running runningCalls

	// ask asks a person and applies the answers (approver.go).
	ask *approve.Approver

	// runs starts and drives code in Deno containers (pml:execute, deno
	// capabilities); its inner calls come back through Call.
	runs *codeRuns

	// path is the request path, audit layer first; belowAudit the same
	// path without it, for a call re-entered within an audited one.
	path, belowAudit call.Handler
}

// New builds a broker. It starts no container and does not contact the
// runtime: initialize and tools/list never wait for Docker.
func New(o Options) (*Broker, error) {
	if o.Config == nil {
		return nil, errors.New("broker: no configuration")
	}
	// A .pml that is a link or a file would get pml's audit log and state
	// wherever it points: refused before anything is built.
	if err := safefs.CheckStateDir(o.Workspace); err != nil {
		return nil, err
	}
	// What the policy file grants applies only as far as the person
	// trusted it (internal/trust); what it narrows applies whatever.
	tst := trust.Status{Trusted: true}
	if o.Trust != nil {
		cfg, st, err := trust.Apply(o.Config, o.Trust, permit.DefaultPermissions().Allow)
		if err != nil {
			o.Logger.Warn().Err(err).Msg("the project's policy is applied as untrusted")
		}
		o.Config, tst = cfg, st
	}
	owner := container.Self()
	if o.Owner != nil {
		owner = *o.Owner
	}
	pol, err := effectivePolicy(o.Config.Sandbox)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Config.Path, err)
	}
	b := &Broker{
		cfg:      o.Config,
		perms:    permit.NewLivePermissions(permit.PermissionsFrom(o.Config), permit.DenySource(o.Config)),
		log:      o.Logger,
		progress: progressLogger(o),
		audit:    audit.New(filepath.Join(o.Workspace, ".pml", "audit.jsonl")),
	}
	sb := newSandbox(o, pol, owner, b.audit)
	sb.grants = tl.NewGrants(o.Trust, o.Workspace, o.Logger)
	b.sb = sb
	b.trust = o.Trust
	b.startStamps = b.stamps()
	b.wsExplicit = o.WorkspaceExplicit
	b.trustState.Set(b.trust, b.log, o.Config, tst)
	b.base, b.cancelBase = context.WithCancel(context.Background())
	context.AfterFunc(b.base, b.running.cancelAll)
	b.runs = codeRunsOf(b, sb)
	b.toolbox = &images.Toolbox{Runtime: o.Runtime, Program: sb.Program}
	sb.UseEgressBox(b.toolbox.Ensure)
	// The sources (broker/tools) meet the sandbox and the executors at
	// tools.Sandbox and tools.Executors (sources.go); the approver is
	// built from them, and given to them once it is.
	part := sandboxPart{sb}
	ex := &executors{sb: sb}
	router := tl.NewRouter(sb.Workspace, o.Config.Servers)
	b.srv = tl.NewServers(tl.ServersOptions{
		Sandbox: part, Log: b.log, Progress: b.progress,
		Idle:               o.Config.Sandbox.IdleTimeout,
		Cache:              &tl.Cache{Path: filepath.Join(o.Workspace, ".pml", "tools-cache.json")},
		ServerStartTimeout: o.ServerStartTimeout,
		Base:               b.base, Inflight: &b.inflight,
		Router: router, Executors: ex, Grants: sb.grants, Permissions: b.perms,
		Slots: slotsOf(sb.Limited),
	}, b.cfg.Servers)
	ex.deps = b.srv.Deps
	b.pins = pinsOf(b, o.Workspace, o.ToolPins)
	fs := sbx.NewToolboxExec(sb.Sandbox, b.toolbox)
	for _, t := range toolbox.Filesystem {
		b.srv.Table.Add(t, fs)
	}
	b.srv.Table.Add(sbx.ShellTool, sbx.NewShellExec(sb.Sandbox, o.Config.Sandbox.ShellImage))
	// The cloud's executor exists before the cloud side: NewCloud lists
	// the cached cloud tools at once, each with that executor (a nil one
	// there panicked the first call of a cached tool).
	ct := &cloudTools{sb: sb, perms: b.perms}
	ex.cloud = sbx.NewCloudExec(ct, b.runs)
	b.cloud = tl.NewCloud(tl.CloudOptions{Sandbox: part, Config: o.Config, Log: b.log, HTTPClient: o.HTTPClient, Router: router, Servers: b.srv, Executors: ex})
	ct.c = b.cloud
	b.registry = tl.NewRegistry(tl.RegistryOptions{Sandbox: part, Config: o.Config, Log: b.log, Cloud: b.cloud, Servers: b.srv, Permissions: b.perms, Grants: sb.grants})
	ex.deno = sbx.NewDenoExec(b.registry, b.runs)
	b.caps = tl.NewCapabilities(tl.CapabilitiesOptions{Sandbox: part, Log: b.log, Registry: b.registry, Cloud: b.cloud, Servers: b.srv, Executors: ex, Grants: sb.grants})
	b.lister = tl.NewLister(part, o.Config, b.toolbox, b.srv, b.registry)
	b.ask = approverOf(b)
	b.cloud.Ask, b.registry.Ask, b.caps.Ask = b.ask, b.ask, b.ask
	b.pins.Ask = b.ask
	b.path, b.belowAudit = b.chain()
	b.registry.BelowAudit = b.belowAudit
	b.pins.BelowAudit = b.belowAudit
	if n, ok := o.Runtime.(container.AuditNoter); ok {
		b.path = auditLayerNoted(b.path, n)
	}
	return b, nil
}

// Close cancels every running call (killing its container) and returns
// within timeout: the calls' own cleanup gets two thirds of it, then a
// sweep by owner label removes whatever this pml still has, whatever the
// rest is doing (a call stuck on the daemon cannot hold pml's exit); what
// was in flight then gets the rest of the time to land and go, and a
// second sweep follows it.
func (b *Broker) Close(timeout time.Duration) {
	b.cancelBase()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	graceful := make(chan struct{})
	go func() {
		// Closing the pool first stops refills while the cancelled calls
		// wind down; it returns once their containers are removed too.
		_ = b.sb.Pool.Close(ctx)
		b.inflight.Wait()
		b.srv.Close()
		// The creates and removals stopped calls no longer wait for (a
		// pre-start cancelled by the pool's Close above, a removal past
		// its grace): what they make or leave is gone before pml exits.
		_ = container.WaitLingering(ctx)
		close(graceful)
	}()
	done := false
	select {
	case <-graceful:
		done = true
	case <-time.After(timeout * 2 / 3):
		b.log.Warn().Msg("some calls did not finish cleaning up in time; removing this pml's containers by label")
	}
	swept := b.sweep(ctx)
	if !done {
		// What was still in flight at the sweep can land after it: the
		// engine finishes a create whose client gave up, and on a loaded
		// machine that can take seconds. Those calls remove their own
		// container once it lands (their context is cancelled): wait for
		// them within the bound, then look once more.
		select {
		case <-graceful:
			swept = b.sweep(ctx)
		case <-ctx.Done():
		}
	}
	// Every container is gone: the last look at pml's own files. When
	// some may remain, their exposures stay journaled for the next start.
	if swept {
		b.sb.ReleaseSession()
	}
	b.sb.Guard.Close()
	b.sb.Egress.Close(ctx)
	// After the proxies: their Close writes their last audit entries.
	_ = b.audit.Close()
}

// sweep removes every container of this pml still there (Close); it
// reports whether it could.
func (b *Broker) sweep(ctx context.Context) bool {
	if b.sb.Runtime == nil || b.sb.Limited != nil && !b.sb.Limited.Used() {
		return true
	}
	n, err := container.RemoveOwn(ctx, b.sb.Runtime, b.sb.Owner)
	if err != nil {
		b.log.Warn().Err(err).Msg("final sweep of this pml's containers; the next pml start removes what is left")
		return false
	}
	if n > 0 {
		b.log.Info().Int("removed", n).Msg("removed containers whose removal had not finished")
	}
	return true
}

// Workspace returns the workspace directory.
func (b *Broker) Workspace() string { return b.sb.Workspace }

// User returns the uid:gid containers run as.
func (b *Broker) User() string { return b.sb.User }

// Policy returns the effective container policy.
func (b *Broker) Policy() policies.Policy { return b.sb.Policy() }

// Call runs one tool call through the request path (see the package
// doc). It never returns a Go error: every failure is a Result with
// IsError and a readable message. Close cancels it.
func (b *Broker) Call(ctx context.Context, req call.Request) call.Result {
	b.inflight.Add(1)
	defer b.inflight.Done()
	if req.Workflows == nil {
		req.Workflows = workflow.NewWorkflows(b.cfg.HIL.Timeout)
	}
	req.Ask = tracedAsk(req.Ask)
	c := call.NewCall(req)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Close cancels it (base); one set of the broker's, not a
	// context.AfterFunc of base's for each call (two allocations each).
	b.running.add(c, cancel)
	defer b.running.remove(c)
	ctx, end := callSpan(ctx, req.Tool)
	res := b.path.Call(ctx, c)
	end(res)
	return res
}

func errorResult(err error) call.Result {
	return call.ResultFor(err)
}

// limitRuntime puts every container of this pml through one cap (see
// container.Limited); o.Runtime itself is kept for image work only.
// slotsOf is the container cap the servers share their idle slots
// through (nil: no engine, no cap).
func slotsOf(l *container.Limited) tl.Slots {
	if l == nil {
		return nil
	}
	return l
}

func limitRuntime(o Options) (container.Runtime, *container.Limited) {
	if o.Runtime == nil {
		return nil, nil
	}
	// Every container's OCI runtime (sandbox.runtime) is settled on its
	// way to the engine (container.RuntimeChooser), whoever starts it.
	limited := container.Limit(container.ChooseRuntime(o.Runtime, o.Logger), o.Config.Sandbox.MaxContainers)
	if o.PullImage != nil {
		// Above the cap: a pull holds no container slot.
		return &sbx.PullingRuntime{Runtime: limited, Pull: o.PullImage, Log: progressLogger(o)}, limited
	}
	return limited, limited
}

// effectivePolicy applies the user's sandbox.* settings to the default
// policy. These are explicit user choices, so they may loosen it.
func effectivePolicy(s config.Sandbox) (policies.Policy, error) {
	p := policies.Default()
	if s.Memory != "" {
		p.Resources.Memory = s.Memory
	}
	if s.CPUs > 0 {
		p.Resources.CPUs = s.CPUs
	}
	if s.Pids > 0 {
		p.Resources.Pids = s.Pids
	}
	if s.Timeout > 0 {
		p.Timeout = policies.Duration(s.Timeout)
	}
	p.Runtime = config.PolicyRuntime(s.Runtime)
	return p, p.Validate()
}

// chooseUser applies container.ChooseUser with this process and the
// workspace owner.
func chooseUser(explicit, ws string) string { return ContainerUser(explicit, ws).User }

// progressLogger is Options.Progress, else Logger.
func progressLogger(o Options) zerolog.Logger {
	if o.Progress != nil {
		return *o.Progress
	}
	return o.Logger
}

// runtimeUser is user, except that a runtime that never runs root
// (container.NoRoot) gets nobody where pml chose root itself; an explicit
// sandbox.user is kept (the runtime then says why it refuses it).
func runtimeUser(rt container.Runtime, user, explicit string) string {
	if nr, ok := rt.(container.NoRoot); ok && nr.RunsNoRoot() && explicit == "" && container.IsRoot(user) {
		return container.Nobody.String()
	}
	return user
}

// ContainerUser is the user pml's containers run as in workspace ws, and
// why (container.Choose with this process and the workspace's owner);
// explicit is sandbox.user as applied (trusted).
func ContainerUser(explicit, ws string) container.UserChoice {
	owner, ok := sbx.FileOwner(ws)
	return container.Choose(explicit, container.Ident{UID: os.Geteuid(), GID: os.Getegid()}, owner, ok)
}
