package broker

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/permit"
	sbx "github.com/pml-dev/pml/broker/sandbox"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/cloud"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/netallow"
	"github.com/pml-dev/pml/internal/shim"
	"github.com/pml-dev/pml/internal/upstream"
	"github.com/pml-dev/pml/policies"
)

// The sources (broker/tools) and the executors (broker/sandbox) meet
// here: tools.Sandbox and tools.Executors over the sandbox, and the
// executors' sandbox.Server and sandbox.CloudTools over the sources.

// sandboxPart is the sandbox as the sources see it (tools.Sandbox).
type sandboxPart struct{ sb *sandbox }

func (p sandboxPart) Workspace() string                       { return p.sb.Workspace }
func (p sandboxPart) Runtime() container.Runtime              { return p.sb.Sandbox.Runtime }
func (p sandboxPart) User() string                            { return p.sb.User }
func (p sandboxPart) Owner() container.Owner                  { return p.sb.Owner }
func (p sandboxPart) Labels(purpose string) map[string]string { return p.sb.Labels(purpose) }
func (p sandboxPart) ServerSpec(ds *deps.Store, cfg config.Server) container.Spec {
	return serverSpec(p.sb, ds, cfg)
}
func (p sandboxPart) ServerPolicy(cfg config.Server) policies.Policy { return serverPolicy(p.sb, cfg) }
func (p sandboxPart) ServerMounts(cfg config.Server) ([]container.Mount, error) {
	return p.sb.Extra.Server(cfg)
}
func (p sandboxPart) ServerEnv(cfg config.Server) ([]string, error) { return p.sb.envFor(cfg) }
func (p sandboxPart) Supervisor(ctx context.Context) string         { return p.sb.Supervisor(ctx) }
func (p sandboxPart) WithEgress(spec *container.Spec, id, who, key string, rules netallow.Rules) error {
	if !rules.Empty() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		why := p.sb.EgressUnreachable(ctx, spec.Image)
		cancel()
		if why != "" {
			// An install reaches its registry only through the proxy:
			// without it nothing could be fetched.
			return fmt.Errorf("%w: %s needs the network (%s) through pml's egress proxy, and %s. Install it where the engine is local and carry the image over (pml images save, pml images load), or run pml on the engine's host", call.ErrUnavailable, who, key, why)
		}
	}
	return p.sb.Egress.Give(spec, id, who, key, rules)
}
func (p sandboxPart) LimitsNote(ctx context.Context) string { return p.sb.LimitsNote(ctx) }

// HostValues: the values of the variables a cloud tool is sent with
// (byokValues).
func (p sandboxPart) HostValues(tool string, names []string) (map[string]string, []string) {
	return byokValues(p.sb, tool, names)
}

// executors makes the sources' executors (tools.Executors); cloud and
// deno are set in New once the cloud and the registry they read exist.
type executors struct {
	sb          *sandbox
	deps        *deps.Store
	cloud, deno tl.Executor
}

// Server is the executor of srv's tools: its pooled container, or one
// per call ("lifetime": "per_call").
func (e *executors) Server(srv *tl.Server) tl.Executor {
	es := execServer{sb: e.sb, deps: e.deps, srv: srv}
	if srv.Cfg.Lifetime == "per_call" {
		return sbx.NewPerCallExec(e.sb.Sandbox, es)
	}
	return sbx.NewPooledExec(e.sb.Sandbox, es)
}
func (e *executors) Deno() tl.Executor  { return e.deno }
func (e *executors) Cloud() tl.Executor { return e.cloud }

// execServer is a configured server as its executor reaches it
// (sandbox.Server).
type execServer struct {
	sb   *sandbox
	deps *deps.Store
	srv  *tl.Server
}

func (e execServer) Name() string              { return e.srv.Cfg.Name }
func (e execServer) Session() *upstream.Server { return e.srv.Up }
func (e execServer) Prepare() error            { return e.srv.Prepare(e.sb.grants, e.sb.envFor) }
func (e execServer) Env() ([]string, error)    { return e.sb.envFor(e.srv.Cfg) }
func (e execServer) Container() (container.Spec, []*mcp.Root) {
	return serverSpec(e.sb, e.deps, e.srv.Cfg), tl.ServerRoots(e.sb.Workspace, e.srv.Cfg)
}

// cloudTools is the cloud side as its executor reaches it
// (sandbox.CloudTools).
type cloudTools struct {
	c     *tl.Cloud
	sb    *sandbox
	perms *permit.LivePermissions
}

func (t cloudTools) Client() *cloud.Client { return t.c.Client }

func (t cloudTools) Keys(tool string) (map[string]string, error) {
	if g, ok := t.c.RegGrantOf(tool); ok && !t.sb.grants.Granted(g) {
		// The approve layer asks first; this is the last guard before a
		// registry's choice of variables leaves the machine.
		return nil, fmt.Errorf("%w: %s comes from a registry entry whose calls would send %s, which you have not granted; nothing was sent. Call it again to be asked, or add it with `pml add`, which shows it",
			tl.ErrRefused, tool, tl.ShownGrant(g))
	}
	keys, missing := byokFor(t.sb, t.c, tool)
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s needs %s, which is not set: %s", tl.ErrCloud, tool, strings.Join(missing, ", "), tl.WhereToSet(t.sb.Workspace))
	}
	return keys, nil
}

func (t cloudTools) Decide(tool string) (call.Decision, string) { return t.perms.Decide(tool) }
func (t cloudTools) PermissionSource() string                   { return t.perms.Source() }

// serverSpec is the container of a pooled server: the same policy as the
// toolbox, its workspace mode, its cache read-only at /deps.
func serverSpec(sb *sandbox, ds *deps.Store, cfg config.Server) container.Spec {
	spec := container.Spec{
		Image:      cfg.Image,
		Cmd:        cfg.Args,
		User:       sb.User,
		Policy:     serverPolicy(sb, cfg),
		Labels:     sb.Labels("mcp:" + cfg.Name),
		WorkingDir: "/",
	}
	if cfg.Command != "" {
		spec.Entrypoint = []string{cfg.Command}
	}
	if cfg.Workspace != "none" {
		spec.Mounts = append(spec.Mounts, sb.WorkspaceMounts(cfg.Workspace != "rw")...)
		spec.WorkingDir = sb.Workspace
	}
	if cfg.Install != nil {
		spec.Mounts = append(spec.Mounts, container.Mount{Source: ds.Dir(cfg.Name), Target: deps.MountPoint, ReadOnly: true})
	}
	if cfg.Workspace == "rw" {
		// The server's own code runs from its container's start (a
		// per-call one waits pre-started in the pool): watched from
		// then until pml closes.
		sb.ExposeForSession(&spec, "mcp:"+cfg.Name)
	}
	// mcps.NAME.network: the server reaches what it allows through pml's
	// egress proxy, and nothing else (sandbox/egress.go).
	// An engine that cannot reach the proxy's socket (a VM, another
	// host): the server runs without network, and the log says so,
	// rather than failing on the socket's mount.
	if !cfg.Network.Rules.Empty() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		why := sb.EgressUnreachable(ctx, cfg.Image)
		cancel()
		if why != "" && sb.Egress.Boxed() {
			// The engine's egress container serves it, on a network of
			// the server's own; pml's in-container program runs the
			// listener around the server's command.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			exe := sb.Supervisor(ctx)
			cancel()
			if exe != "" {
				spec.Mounts = append(spec.Mounts, container.Mount{Source: exe, Target: shim.Binary, ReadOnly: true})
				sb.Egress.GiveBoxed(&spec, sbx.ServerEgressID(cfg.Name), "server "+cfg.Name, sbx.NetworkKey(cfg.Private, cfg.Name), cfg.Network.Rules)
				return spec
			}
			why = "pml's in-container program is not where the engine can mount it"
		}
		if why != "" {
			sb.Log.Warn().Str("server", cfg.Name).Msg(sbx.NoNetworkNote("server "+cfg.Name, sbx.NetworkKey(cfg.Private, cfg.Name), why))
			return spec
		}
	}
	if err := sb.Egress.Give(&spec, sbx.ServerEgressID(cfg.Name), "server "+cfg.Name, sbx.NetworkKey(cfg.Private, cfg.Name), cfg.Network.Rules); err != nil {
		sb.Log.Error().Err(err).Str("server", cfg.Name).Msg("the server runs without the network it was given")
	}
	return spec
}

// serverPolicy is the project's policy with the server's own
// sandbox.runtime, when it names one.
func serverPolicy(sb *sandbox, cfg config.Server) policies.Policy {
	p := sb.Policy()
	if cfg.Runtime != "" {
		p.Runtime = config.PolicyRuntime(cfg.Runtime)
	}
	return p
}
