package broker

import (
	"context"
	"time"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/netallow"
	"github.com/pml-dev/pml/policies"
)

// What the sources (broker/tools) need of the sandbox and the executors,
// until those are a package of their own: tools.Sandbox and
// tools.Executors, given by these adapters.

// sandboxPart is the sandbox as the sources see it (tools.Sandbox).
type sandboxPart struct{ sb *sandbox }

func (p sandboxPart) Workspace() string                       { return p.sb.ws }
func (p sandboxPart) Runtime() container.Runtime              { return p.sb.rt }
func (p sandboxPart) User() string                            { return p.sb.user }
func (p sandboxPart) Owner() container.Owner                  { return p.sb.owner }
func (p sandboxPart) Labels(purpose string) map[string]string { return p.sb.labels(purpose) }
func (p sandboxPart) ServerSpec(ds *deps.Store, cfg config.Server) container.Spec {
	return serverSpec(p.sb, ds, cfg)
}
func (p sandboxPart) ServerPolicy(cfg config.Server) policies.Policy { return serverPolicy(p.sb, cfg) }
func (p sandboxPart) ServerMounts(cfg config.Server) ([]container.Mount, error) {
	return p.sb.extra.Server(cfg)
}
func (p sandboxPart) ServerEnv(cfg config.Server) ([]string, error) { return p.sb.envFor(cfg) }
func (p sandboxPart) Supervisor(ctx context.Context) string         { return p.sb.supervisor(ctx) }
func (p sandboxPart) WithEgress(spec *container.Spec, id, who, key string, rules netallow.Rules) error {
	return p.sb.withEgress(spec, id, who, key, rules)
}
func (p sandboxPart) LimitsNote(ctx context.Context) string { return p.sb.limitsNote(ctx) }

// executors makes the sources' executors (tools.Executors); cloud and
// deno are set in New once the cloud and the registry they read exist.
type executors struct {
	sb          *sandbox
	deps        *deps.Store
	cloud, deno executor
}

func (e *executors) Server(srv *tl.Server) tl.Executor {
	if srv.Cfg.Lifetime == "per_call" {
		return perCallExec{sb: e.sb, deps: e.deps, srv: srv}
	}
	return pooledExec{sb: e.sb, srv: srv}
}
func (e *executors) Deno() tl.Executor  { return e.deno }
func (e *executors) Cloud() tl.Executor { return e.cloud }

// serverSpec is the container of a pooled server: the same policy as the
// toolbox, its workspace mode, its cache read-only at /deps.
func serverSpec(sb *sandbox, ds *deps.Store, cfg config.Server) container.Spec {
	spec := container.Spec{
		Image:      cfg.Image,
		Cmd:        cfg.Args,
		User:       sb.user,
		Policy:     serverPolicy(sb, cfg),
		Labels:     sb.labels("mcp:" + cfg.Name),
		WorkingDir: "/",
	}
	if cfg.Command != "" {
		spec.Entrypoint = []string{cfg.Command}
	}
	if cfg.Workspace != "none" {
		spec.Mounts = append(spec.Mounts, sb.workspaceMounts(cfg.Workspace != "rw")...)
		spec.WorkingDir = sb.ws
	}
	if cfg.Install != nil {
		spec.Mounts = append(spec.Mounts, container.Mount{Source: ds.Dir(cfg.Name), Target: deps.MountPoint, ReadOnly: true})
	}
	if cfg.Workspace == "rw" {
		// The server's own code runs from its container's start (a
		// per-call one waits pre-started in the pool): watched from
		// then until pml closes.
		sb.exposeForSession(&spec, "mcp:"+cfg.Name)
	}
	// mcps.NAME.network: the server reaches what it allows through pml's
	// egress proxy, and nothing else (sandbox/egress.go).
	if err := sb.withEgress(&spec, serverEgressID(cfg.Name), "server "+cfg.Name, networkKey(cfg.Private, cfg.Name), cfg.Network.Rules); err != nil {
		sb.log.Error().Err(err).Str("server", cfg.Name).Msg("the server runs without the network it was given")
	}
	return spec
}

// serverPolicy is the project's policy with the server's own
// sandbox.runtime, when it names one.
func serverPolicy(sb *sandbox, cfg config.Server) policies.Policy {
	p := sb.policy()
	if cfg.Runtime != "" {
		p.Runtime = config.PolicyRuntime(cfg.Runtime)
	}
	return p
}

func timeDuration(d policies.Duration) time.Duration { return time.Duration(d) }

// HostValues: the values of the variables a cloud tool is sent with
// (byokValues).
func (p sandboxPart) HostValues(tool string, names []string) (map[string]string, []string) {
	return byokValues(p.sb, tool, names)
}
