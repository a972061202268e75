package tools

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"context"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/routing"
	"github.com/pml-dev/pml/internal/upstream"
)

// Server is one configured stdio MCP server.
type Server struct {
	// Cfg is its entry; Up its container's MCP session (started on
	// first use, reused by every call: the executors call it).
	Cfg config.Server
	Up  *upstream.Server
	// installMu serialises installs of this server.
	installMu sync.Mutex

	mu     sync.Mutex
	loaded bool // its tools are registered
	// live: its tools were registered from what the server listed in
	// this process, not only from the tools cache (Fresh).
	live  bool
	names []string // registered tool names (prefixed)
}

// Servers is the configured stdio MCP servers (mcps, private_mcps, and
// those a registry entry or a capability adds at run time) and the tool
// table every source registers its tools in (table.go). It holds what it
// uses, never the *Broker. Safe for concurrent use.
type Servers struct {
	sb       Sandbox
	log      zerolog.Logger
	progress zerolog.Logger
	// idle is sandbox.idle_timeout as pml started (read once).
	idle time.Duration
	// Table holds every callable tool: the built-in ones, the servers',
	// the cloud's and the capabilities'.
	Table Table

	servers     map[string]*Server
	serverOrder []string
	// Deps is the store of installed server dependencies; Cache the
	// servers' cached tool lists.
	Deps               *deps.Store
	Cache              *Cache
	serverStartTimeout time.Duration
	// serversMu guards servers and serverOrder: registry servers are
	// added at run time.
	serversMu sync.RWMutex
	// perCallOffers holds what each per-call server (by its *Server: a
	// reload that replaces the server lists it again) offers beside its
	// tools (a ServerOffer), listed once (server_features.go).
	perCallOffers sync.Map

	// base and inflight are the Broker's: a server a reload adds loads
	// under base, and Close waits for it as for a call (Apply).
	base     context.Context
	inflight *sync.WaitGroup

	// router is told that a server's namespace is local (the cloud's
	// routing table: its calls never leave the machine).
	router *routing.Router
	// exec makes the executors of the servers' tools.
	exec Executors
	// grants guards a registry server's start (registry_grant.go).
	grants *Grants
	// perms is the permissions in force (PreinstallApproved, ListedTools).
	perms Permissions

	// refused holds the names (source, name) left out of a listing and
	// logged once (server_tools.go).
	refusedMu sync.Mutex
	refused   map[[2]string]bool
	// notices are told of the servers' resource and prompt
	// notifications (server_features.go).
	notices notices
	// released is told when a pooled server's last call in flight ends
	// (Slots.Idle; nil: no cap to tell).
	released func()
}

// ServersOptions are what NewServers is given.
type ServersOptions struct {
	Sandbox            Sandbox
	Log, Progress      zerolog.Logger
	Idle               time.Duration
	Cache              *Cache
	ServerStartTimeout time.Duration
	// Base and Inflight: see Servers.base.
	Base        context.Context
	Inflight    *sync.WaitGroup
	Router      *routing.Router
	Executors   Executors
	Grants      *Grants
	Permissions Permissions
	// Slots, when set, is the cap on containers (sandbox.max_containers):
	// a start waiting for a slot takes the one of the pooled server idle
	// the longest (reclaimIdle).
	Slots Slots
}

// Slots is the cap on this pml's containers (container.Limited): a
// start waiting for a slot calls the functions AddReclaim registered,
// and tries them again whenever Idle says a container became idle.
type Slots interface {
	AddReclaim(func() bool)
	Idle()
}

// NewServers makes the server set with the configured servers (created,
// not started).
func NewServers(o ServersOptions, configured map[string]config.Server) *Servers {
	s := &Servers{sb: o.Sandbox, log: o.Log, progress: o.Progress, idle: o.Idle, Cache: o.Cache,
		serverStartTimeout: o.ServerStartTimeout, base: o.Base, inflight: o.Inflight, router: o.Router,
		exec: o.Executors, grants: o.Grants, perms: o.Permissions}
	if o.Slots != nil {
		s.released = o.Slots.Idle
		o.Slots.AddReclaim(s.reclaimIdle)
	}
	s.Setup(configured)
	return s
}

// reclaimIdle stops the pooled server that has had no call in flight
// the longest, so that a container start waiting for a slot gets its
// slot: without it, a first tools/list of more servers than
// sandbox.max_containers waited for slots the servers it had listed
// held until sandbox.idle_timeout (each start gave up after its start
// timeout, and the list lacked their tools). The server starts again at
// its next call. It reports whether it stopped one.
func (s *Servers) reclaimIdle() bool {
	for range 3 { // a server taken by a call meanwhile: the next oldest
		var victim *Server
		var since time.Time
		for _, srv := range s.List() {
			if t, ok := srv.Up.IdleSince(); ok && (victim == nil || t.Before(since)) {
				victim, since = srv, t
			}
		}
		if victim == nil {
			return false
		}
		if victim.Up.StopIdle(since) {
			return true
		}
	}
	return false
}

// Setup creates (but does not start) the configured servers.
func (s *Servers) Setup(configured map[string]config.Server) {
	s.Deps = deps.NewStore(s.sb.Workspace())
	// A record of .pml/deps.json pml did not write here is said once:
	// the server is installed again (internal/deps/vouched.go).
	s.Deps.Note = func(msg string) { s.log.Warn().Msg(msg) }
	s.servers = map[string]*Server{}
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
		s.Add(cfg)
	}
}

// Add creates (but does not start) a server; one from the registry
// joins at run time. A name already configured is kept as it is: local
// configuration wins over the registry.
func (s *Servers) Add(cfg config.Server) *Server {
	s.serversMu.Lock()
	defer s.serversMu.Unlock()
	if srv, ok := s.servers[cfg.Name]; ok {
		return srv
	}
	srv := &Server{Cfg: cfg}
	srv.Up = upstream.New(upstream.Options{
		Name:         cfg.Name,
		Runtime:      s.sb.Runtime(),
		Spec:         s.sb.ServerSpec(s.Deps, cfg),
		Mounts:       func() ([]container.Mount, error) { return s.sb.ServerMounts(cfg) },
		Roots:        ServerRoots(s.sb.Workspace(), cfg),
		RootMount:    ServerRootMount(s.sb.Workspace(), cfg),
		Protocol:     cfg.Protocol,
		Idle:         s.idle,
		Released:     s.released,
		StartTimeout: s.serverStartTimeout,
		ToolsChanged: func(tools []*mcp.Tool) {
			srv.mu.Lock()
			srv.live = true
			srv.mu.Unlock()
			s.RegisterTools(srv, tools)
		},
		Notice: func(method string, params any) { s.notices.tell(cfg.Name, method, params) },
		Logger: s.log,
	})
	s.servers[cfg.Name] = srv
	s.serverOrder = append(s.serverOrder, cfg.Name)
	s.router.AddLocal(cfg.Name)
	return srv
}

// ServerRoots are the MCP roots a server is given: the workspace, unless
// it has none.
func ServerRoots(ws string, cfg config.Server) []*mcp.Root {
	if cfg.Workspace == "none" {
		return nil
	}
	return []*mcp.Root{{URI: "file://" + ws, Name: filepath.Base(ws)}}
}

// ServerRootMount is where a server's container sees the workspace,
// through which a client's roots reach it (upstream.MapRoots): at its own
// path (sandbox.WorkspaceMounts), unless it has none.
func ServerRootMount(ws string, cfg config.Server) upstream.RootMount {
	if cfg.Workspace == "none" || ws == "" {
		return upstream.RootMount{}
	}
	p := path.Clean(filepath.ToSlash(ws))
	return upstream.RootMount{Host: p, Container: p}
}

// Close stops every server container.
func (s *Servers) Close() {
	var wg sync.WaitGroup
	for _, srv := range s.List() {
		wg.Add(1)
		go func() { defer wg.Done(); srv.Up.Close() }()
	}
	wg.Wait()
}

// List returns the servers in order.
func (s *Servers) List() []*Server {
	s.serversMu.RLock()
	defer s.serversMu.RUnlock()
	out := make([]*Server, 0, len(s.serverOrder))
	for _, n := range s.serverOrder {
		out = append(out, s.servers[n])
	}
	return out
}
