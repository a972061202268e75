package broker

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"context"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	sbx "github.com/pml-dev/pml/broker/sandbox"
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

// serverSet is the configured stdio MCP servers (mcps, private_mcps, and
// those a registry entry or a capability adds at run time) and the tool
// table every source registers its tools in (tools/table.go). It holds
// what it uses, never the *Broker: what it needs of another part is a
// field wired in New.
//
// It is broker/tools' to hold, and stays here until what it builds on
// is below it: broker's sandbox (a server's container spec, environment
// and install run on it), the executors it gives each server's tools
// (pooledExec, perCallExec, which read the fast path's forwardCall and
// the MCP surface's callInfo); the tool table and its Executor interface
// are in broker/tools already.
type serverSet struct {
	sb       *sandbox
	log      zerolog.Logger
	progress zerolog.Logger
	// idle is sandbox.idle_timeout as pml started (read once).
	idle time.Duration
	// tools holds every callable tool: the built-in ones, the servers',
	// the cloud's and the capabilities'.
	tools toolTable

	servers            map[string]*server
	serverOrder        []string
	deps               *deps.Store
	toolsCache         *toolsCache
	serverStartTimeout time.Duration
	// serversMu guards servers and serverOrder: registry servers are
	// added at run time.
	serversMu sync.RWMutex

	// base and inflight are the Broker's: a server a reload adds loads
	// under base, and Close waits for it as for a call (applyServers).
	base     context.Context
	inflight *sync.WaitGroup

	// addLocal tells the cloud's router that a server's namespace is
	// local (a no-op before the cloud is set up: it reads the configured
	// servers itself).
	addLocal func(name string)
	// loadRegistryServers makes the registry's stdio servers this
	// workspace fetched (registry.go), before LoadServers loads them all.
	loadRegistryServers func(ctx context.Context)
	// decide is the permissions in force (PreinstallApproved, ListedTools).
	decide func(tool string) (Decision, string)

	// refused holds the names (source, name) left out of a listing and
	// logged once (server_tools.go).
	refusedMu sync.Mutex
	refused   map[[2]string]bool
}

// setupServers creates (but does not start) the configured servers.
func (s *serverSet) setupServers(configured map[string]config.Server) {
	s.deps = deps.NewStore(s.sb.Workspace)
	// A record of .pml/deps.json pml did not write here is said once:
	// the server is installed again (internal/deps/vouched.go).
	s.deps.Note = func(msg string) { s.log.Warn().Msg(msg) }
	s.servers = map[string]*server{}
	names := make([]string, 0, len(configured))
	for n := range configured {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		cfg := configured[name]
		if cfg.Private {
			s.log.Debug().Str("server", name).Msg("private_mcps entry overrides any registry entry of the same name")
		}
		s.addServer(cfg)
	}
}

// addServer creates (but does not start) a server; one from the registry
// joins at run time. A name already configured is kept as it is: local
// configuration wins over the registry.
func (s *serverSet) addServer(cfg config.Server) *server {
	s.serversMu.Lock()
	defer s.serversMu.Unlock()
	if srv, ok := s.servers[cfg.Name]; ok {
		return srv
	}
	srv := &server{cfg: cfg}
	srv.up = upstream.New(upstream.Options{
		Name:         cfg.Name,
		Runtime:      s.sb.Runtime,
		Spec:         serverSpec(s.sb, s.deps, cfg),
		Mounts:       func() ([]container.Mount, error) { return s.sb.Extra.Server(cfg) },
		Roots:        serverRoots(s.sb.Workspace, cfg),
		Idle:         s.idle,
		StartTimeout: s.serverStartTimeout,
		ToolsChanged: func(tools []*mcp.Tool) { s.registerServerTools(srv, tools) },
		Logger:       s.log,
	})
	s.servers[cfg.Name] = srv
	s.serverOrder = append(s.serverOrder, cfg.Name)
	s.addLocal(cfg.Name)
	return srv
}

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

func serverRoots(ws string, cfg config.Server) []*mcp.Root {
	if cfg.Workspace == "none" {
		return nil
	}
	return []*mcp.Root{{URI: "file://" + ws, Name: filepath.Base(ws)}}
}

// closeServers stops every server container.
func (s *serverSet) closeServers() {
	var wg sync.WaitGroup
	for _, srv := range s.serverList() {
		wg.Add(1)
		go func() { defer wg.Done(); srv.up.Close() }()
	}
	wg.Wait()
}

// serverList returns the servers in order.
func (s *serverSet) serverList() []*server {
	s.serversMu.RLock()
	defer s.serversMu.RUnlock()
	out := make([]*server, 0, len(s.serverOrder))
	for _, n := range s.serverOrder {
		out = append(out, s.servers[n])
	}
	return out
}

func policiesDuration(d time.Duration) policies.Duration { return policies.Duration(d) }
