package broker

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/upstream"
	"github.com/pml-dev/pml/policies"
)

// server is one configured stdio MCP server.
type server struct {
	cfg config.Server
	up  *upstream.Server
	// installMu serialises installs of this server.
	installMu sync.Mutex

	mu     sync.Mutex
	loaded bool     // its tools are registered
	names  []string // registered tool names (prefixed)
}

// setupServers creates (but does not start) the configured servers.
func (b *Broker) setupServers() {
	b.deps = deps.NewStore(b.sb.ws)
	b.servers = map[string]*server{}
	names := make([]string, 0, len(b.cfg.Servers))
	for n := range b.cfg.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		cfg := b.cfg.Servers[name]
		if cfg.Private {
			b.log.Debug().Str("server", name).Msg("private_mcps entry overrides any registry entry of the same name")
		}
		b.addServer(cfg)
	}
}

// addServer creates (but does not start) a server; one from the registry
// joins at run time. A name already configured is kept as it is: local
// configuration wins over the registry.
func (b *Broker) addServer(cfg config.Server) *server {
	b.serversMu.Lock()
	defer b.serversMu.Unlock()
	if srv, ok := b.servers[cfg.Name]; ok {
		return srv
	}
	srv := &server{cfg: cfg}
	srv.up = upstream.New(upstream.Options{
		Name:         cfg.Name,
		Runtime:      b.sb.rt,
		Spec:         serverSpec(b.sb, b.deps, cfg),
		Mounts:       func() ([]container.Mount, error) { return b.sb.extra.Server(cfg) },
		Roots:        serverRoots(b.sb.ws, cfg),
		Idle:         b.cfg.Sandbox.IdleTimeout,
		StartTimeout: b.serverStartTimeout,
		ToolsChanged: func(tools []*mcp.Tool) { b.registerServerTools(srv, tools) },
		Logger:       b.log,
	})
	b.servers[cfg.Name] = srv
	b.serverOrder = append(b.serverOrder, cfg.Name)
	if b.cloud != nil {
		b.cloud.router.AddLocal(cfg.Name)
	}
	return srv
}

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

func serverRoots(ws string, cfg config.Server) []*mcp.Root {
	if cfg.Workspace == "none" {
		return nil
	}
	return []*mcp.Root{{URI: "file://" + ws, Name: filepath.Base(ws)}}
}

// closeServers stops every server container.
func (b *Broker) closeServers() {
	var wg sync.WaitGroup
	for _, srv := range b.serverList() {
		wg.Add(1)
		go func() { defer wg.Done(); srv.up.Close() }()
	}
	wg.Wait()
}

// serverList returns the servers in order.
func (b *Broker) serverList() []*server {
	b.serversMu.RLock()
	defer b.serversMu.RUnlock()
	out := make([]*server, 0, len(b.serverOrder))
	for _, n := range b.serverOrder {
		out = append(out, b.servers[n])
	}
	return out
}

func timeDuration(d policies.Duration) time.Duration { return time.Duration(d) }

func policiesDuration(d time.Duration) policies.Duration { return policies.Duration(d) }
