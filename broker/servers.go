package broker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/lazyre"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/toolbox"
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

// callInfo travels in a call's context from the MCP layer to a server
// tool: where progress, log messages and server requests go.
type callInfo struct {
	relay         upstream.Relay
	progressToken any
}

type callInfoKey struct{}

func withCallInfo(ctx context.Context, ci callInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, ci)
}

// setupServers creates (but does not start) the configured servers.
func (b *Broker) setupServers() {
	b.deps = deps.NewStore(b.ws)
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
		Runtime:      b.rt,
		Spec:         b.serverSpec(cfg),
		Roots:        b.serverRoots(cfg),
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
func (b *Broker) serverSpec(cfg config.Server) container.Spec {
	spec := container.Spec{
		Image:      cfg.Image,
		Cmd:        cfg.Args,
		User:       b.user,
		Policy:     b.policy,
		Labels:     b.labels("mcp:" + cfg.Name),
		WorkingDir: "/",
	}
	if cfg.Command != "" {
		spec.Entrypoint = []string{cfg.Command}
	}
	if cfg.Workspace != "none" {
		spec.Mounts = append(spec.Mounts, b.workspaceMounts(cfg.Workspace != "rw")...)
		spec.WorkingDir = b.ws
	}
	if cfg.Install != nil {
		spec.Mounts = append(spec.Mounts, container.Mount{Source: b.deps.Dir(cfg.Name), Target: deps.MountPoint, ReadOnly: true})
	}
	if cfg.Workspace == "rw" {
		// The server's own code runs from its container's start (a
		// per-call one waits pre-started in the pool): watched from
		// then until pml closes.
		b.exposeForSession(&spec, "mcp:"+cfg.Name)
	}
	return spec
}

func (b *Broker) serverRoots(cfg config.Server) []*mcp.Root {
	if cfg.Workspace == "none" {
		return nil
	}
	return []*mcp.Root{{URI: "file://" + b.ws, Name: filepath.Base(b.ws)}}
}

// serverOf returns the configured server a tool name belongs to.
func (b *Broker) serverOf(tool string) *server {
	ns, _, ok := strings.Cut(tool, ":")
	if !ok {
		return nil
	}
	b.serversMu.RLock()
	defer b.serversMu.RUnlock()
	return b.servers[ns]
}

// envFor builds a server's environment: its env (with ${NAME} taken from
// pml's environment or the workspace's .env, for the user's own
// .pml.json servers only; a registry entry's env is literal) and its
// env_required variables. Nothing else of the host reaches the container.
func (b *Broker) envFor(cfg config.Server) ([]string, error) {
	// A .env a container changed is moved aside before it is read.
	b.guard.Verify(".env")
	// .env is read only when a variable is not in pml's environment, so a
	// .env pml cannot use (a link, a FIFO) only fails the servers that
	// need it, with the reason.
	var (
		dotenv     map[string]string
		dotenvErr  error
		dotenvRead bool
	)
	lookup := func(name string) (string, bool) {
		if ownVariable(name) {
			return "", false
		}
		if v, ok := os.LookupEnv(name); ok {
			return v, true
		}
		if !dotenvRead {
			dotenv, dotenvErr = readDotEnv(b.ws)
			dotenvRead = true
		}
		v, ok := dotenv[name]
		return v, ok
	}
	var missing []string
	for _, name := range cfg.EnvRequired {
		if _, ok := lookup(name); !ok {
			missing = append(missing, name)
		}
	}
	var env []string
	keys := make([]string, 0, len(cfg.Env))
	for k := range cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if cfg.FromRegistry {
			// An untrusted entry asking for ${OPENAI_API_KEY} gets the
			// text, never pml's value: values come only for the names in
			// its envRequired, which the person approving sees.
			if !slices.Contains(cfg.EnvRequired, k) {
				env = append(env, k+"="+cfg.Env[k])
			}
			continue
		}
		v := envRef.ReplaceAllStringFunc(cfg.Env[k], func(ref string) string {
			name := envRef.FindStringSubmatch(ref)[1]
			val, ok := lookup(name)
			if !ok {
				missing = append(missing, name)
			}
			return val
		})
		env = append(env, k+"="+v)
	}
	if len(missing) > 0 && dotenvErr != nil {
		sort.Strings(missing)
		return nil, fmt.Errorf("the MCP server %s needs the environment variable %s, which is not set, and pml does not read the workspace's .env: %w; no container was started",
			cfg.Name, strings.Join(dedupe(missing), ", "), dotenvErr)
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("the MCP server %s needs the environment variable %s, which is not set. "+
			"Set it in the env of the pml entry in your MCP client's configuration (e.g. .mcp.json) or in %s; no container was started",
			cfg.Name, strings.Join(dedupe(missing), ", "), filepath.Join(b.ws, ".env"))
	}
	for _, name := range cfg.EnvRequired {
		if _, set := cfg.Env[name]; !set || cfg.FromRegistry {
			v, _ := lookup(name)
			env = append(env, name+"="+v)
		}
	}
	return env, nil
}

var envRef = lazyre.New(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// ownVariable: pml's own settings and secrets (PML_API_KEY above all)
// are never handed to a server or sent as a tool's key, whatever its
// configuration or a registry entry asks for.
func ownVariable(name string) bool { return strings.HasPrefix(strings.ToUpper(name), "PML_") }

func dedupe(l []string) []string {
	out := l[:0]
	for i, s := range l {
		if i == 0 || s != l[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// readDotEnv reads the workspace's .env: KEY=VALUE lines (comments, blank
// lines and an optional "export " ignored; surrounding quotes removed). A
// missing file is empty. Only a regular file inside the workspace is read
// (internal/safefs): a .env that is a link (to a root-only file outside,
// whose contents would go into a server's environment), a FIFO or a huge
// file is an error naming it.
func readDotEnv(ws string) (map[string]string, error) {
	out := map[string]string{}
	data, err := safefs.ReadFile(ws, ".env", safefs.MaxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), int(safefs.MaxConfig))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}

// loadServer makes sure a server's tools are registered: from the tools
// cache when its configuration is unchanged, else by starting it.
func (b *Broker) loadServer(ctx context.Context, srv *server) error {
	srv.mu.Lock()
	loaded := srv.loaded
	srv.mu.Unlock()
	if loaded {
		return nil
	}
	if !b.deps.Installed(srv.cfg) {
		return errNotInstalled
	}
	if tools, ok := b.toolsCache.get(srv.cfg); ok {
		b.registerServerTools(srv, tools)
		return nil
	}
	if err := b.prepareServer(srv); err != nil {
		return err
	}
	tools, err := srv.up.Tools(ctx)
	if err != nil {
		return err
	}
	b.toolsCache.put(srv.cfg, tools)
	b.registerServerTools(srv, tools)
	return nil
}

var errNotInstalled = errors.New("not installed")

// prepareServer checks what must hold before a server's container may
// start: its environment.
func (b *Broker) prepareServer(srv *server) error {
	env, err := b.envFor(srv.cfg)
	if err != nil {
		return err
	}
	srv.up.SetEnv(env)
	return nil
}

// LoadServers registers the tools of every installed server (tools/list).
// A server that cannot start is logged and left out; it does not fail
// the list.
func (b *Broker) LoadServers(ctx context.Context) {
	b.loadRegistryServers(ctx)
	var wg sync.WaitGroup
	for _, srv := range b.serverList() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.loadServer(ctx, srv); err != nil {
				if errors.Is(err, errNotInstalled) {
					b.log.Info().Str("server", srv.cfg.Name).Msg("not installed yet: its tools appear after the first call to one of them is approved")
					return
				}
				b.log.Warn().Err(err).Str("server", srv.cfg.Name).Msg("its tools are not listed")
			}
		}()
	}
	wg.Wait()
}

// registerServerTools makes a server's tools callable as server:tool and
// tells the MCP layer.
func (b *Broker) registerServerTools(srv *server, tools []*mcp.Tool) {
	var defs []toolbox.Tool
	for _, t := range tools {
		schema, _ := json.Marshal(t.InputSchema)
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		defs = append(defs, toolbox.Tool{Name: srv.cfg.Name + ":" + t.Name, Description: desc, InputSchema: schema})
	}
	srv.mu.Lock()
	old := srv.names
	srv.mu.Unlock()
	names := b.replaceTools(old, defs, (*Broker).runServerTool)
	srv.mu.Lock()
	srv.names = names
	srv.loaded = true
	srv.mu.Unlock()
}

// replaceTools swaps one source's tools (a server's, the cloud's): defs
// are registered with run, names in old but not in defs are removed, and
// the MCP layer is told. A name that another source already registered
// (e.g. a local tool) is kept as it was. It returns the names now held.
func (b *Broker) replaceTools(old []string, defs []toolbox.Tool, run func(*Broker, context.Context, toolbox.Tool, map[string]any) Result) []string {
	mine := map[string]bool{}
	for _, n := range old {
		mine[n] = true
	}
	b.toolsMu.Lock()
	keep := map[string]bool{}
	var names []string
	var added []Tool
	for _, d := range defs {
		if _, exists := b.tools[d.Name]; exists && !mine[d.Name] {
			continue
		}
		if _, exists := b.tools[d.Name]; !exists {
			b.order = append(b.order, d.Name)
		}
		keep[d.Name] = true
		names = append(names, d.Name)
		b.tools[d.Name] = toolEntry{def: d, run: run}
		added = append(added, Tool{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema})
	}
	var removed []string
	for _, n := range old {
		if !keep[n] {
			delete(b.tools, n)
			removed = append(removed, n)
		}
	}
	if len(removed) > 0 {
		order := b.order[:0]
		for _, n := range b.order {
			if _, ok := b.tools[n]; ok {
				order = append(order, n)
			}
		}
		b.order = order
	}
	listeners := append([]func([]Tool, []string){}, b.toolListeners...)
	b.toolsMu.Unlock()
	for _, l := range listeners {
		l(added, removed)
	}
	return names
}

// runServerTool forwards a call to the server's pooled container.
func (b *Broker) runServerTool(ctx context.Context, def toolbox.Tool, args map[string]any) Result {
	srv := b.serverOf(def.Name)
	if srv == nil {
		return errorResult(fmt.Errorf("%w %q", ErrNotFound, def.Name))
	}
	if err := b.prepareServer(srv); err != nil {
		return errorResult(err)
	}
	ci, _ := ctx.Value(callInfoKey{}).(callInfo)
	if t := b.policy.Timeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeDuration(t))
		defer cancel()
	}
	raw, _ := json.Marshal(args)
	_, tool, _ := strings.Cut(def.Name, ":")
	var res *mcp.CallToolResult
	var err error
	if srv.cfg.Lifetime == "per_call" {
		res, err = b.callPerCall(ctx, srv, tool, raw, ci) // percall.go
	} else {
		res, err = srv.up.Call(ctx, tool, raw, ci.progressToken, ci.relay)
	}
	if err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return errorResult(fmt.Errorf("%s timed out after %s (the server was told to cancel it; raise sandbox.timeout in .pml.json if the work needs longer)", def.Name, timeDuration(b.policy.Timeout)))
		case errors.Is(err, context.Canceled):
			return errorResult(fmt.Errorf("%s was cancelled", def.Name))
		case errors.Is(err, container.ErrUnavailable), errors.Is(err, container.ErrImageMissing):
			return errorResult(fmt.Errorf("%w: %w", ErrUnavailable, err))
		}
		return errorResult(err)
	}
	return Result{Text: joinText(res), Structured: res.StructuredContent, IsError: res.IsError, upstream: res}
}

func joinText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// install runs a server's install step (once; concurrent callers wait)
// and then registers its tools.
func (b *Broker) install(ctx context.Context, srv *server) error {
	srv.installMu.Lock()
	defer srv.installMu.Unlock()
	if b.deps.Installed(srv.cfg) {
		return nil
	}
	pol := b.policy
	pol.Network = "bridge"
	if pol.Timeout < policiesDuration(deps.InstallTimeout) {
		pol.Timeout = policiesDuration(deps.InstallTimeout)
	}
	in := &deps.Installer{
		Store:   b.deps,
		Runtime: b.rt,
		Spec:    container.Spec{Image: srv.cfg.Image, User: b.user, Policy: pol, Labels: b.labels("install:" + srv.cfg.Name)},
		Env:     os.Getenv,
	}
	b.log.Info().Str("server", srv.cfg.Name).Str("command", srv.cfg.Install.Command+" "+strings.Join(srv.cfg.Install.Args, " ")).Msg("installing")
	if err := in.Install(ctx, srv.cfg); err != nil {
		return err
	}
	b.log.Info().Str("server", srv.cfg.Name).Str("integrity", srv.cfg.Install.Integrity).Msg("installed and verified")
	return nil
}

// dependencyApproval describes an install for a person.
func (b *Broker) dependencyApproval(wf *workflow, srv *server) Approval {
	a := b.approval(wf)
	inst := srv.cfg.Install
	a.Description = fmt.Sprintf("Install the MCP server %s (`%s %s` in %s, with network access, into %s) so that %s can run?",
		srv.cfg.Name, inst.Command, strings.Join(inst.Args, " "), srv.cfg.Image, b.deps.Dir(srv.cfg.Name), wf.tool)
	a.Context = map[string]any{
		"server":    srv.cfg.Name,
		"version":   versionOf(inst),
		"command":   append([]string{inst.Command}, inst.Args...),
		"image":     srv.cfg.Image,
		"integrity": inst.Integrity,
		"network":   true,
		"pattern":   wf.pattern,
		"workspace": b.ws,
	}
	a.Description += b.describeAccess(wf.tool, a.Context)
	return a
}

func versionOf(inst *config.Install) string {
	if len(inst.Args) == 0 {
		return ""
	}
	last := inst.Args[len(inst.Args)-1]
	if at := strings.LastIndexByte(last, '@'); at > 0 {
		return last[at+1:]
	}
	return ""
}

// lookup finds a tool; a server tool not registered yet is loaded first.
func (b *Broker) lookup(ctx context.Context, name string) (toolEntry, error) {
	b.toolsMu.RLock()
	entry, ok := b.tools[name]
	b.toolsMu.RUnlock()
	if ok {
		return entry, nil
	}
	srv := b.serverOf(name)
	if srv == nil {
		return toolEntry{}, fmt.Errorf("%w %q: tools/list shows the available tools", ErrNotFound, name)
	}
	if err := b.loadServer(ctx, srv); err != nil {
		return toolEntry{}, err
	}
	b.toolsMu.RLock()
	entry, ok = b.tools[name]
	b.toolsMu.RUnlock()
	if !ok {
		srv.mu.Lock()
		names := strings.Join(srv.names, ", ")
		srv.mu.Unlock()
		return toolEntry{}, fmt.Errorf("%w %q: the MCP server %s offers %s", ErrNotFound, name, srv.cfg.Name, names)
	}
	return entry, nil
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

// OnToolsChanged registers a listener for tools added or removed at run
// time (servers loaded, list_changed).
func (b *Broker) OnToolsChanged(f func(added []Tool, removed []string)) {
	b.toolsMu.Lock()
	b.toolListeners = append(b.toolListeners, f)
	b.toolsMu.Unlock()
}

// HasServer reports whether name is a configured server's prefix.
func (b *Broker) HasServer(tool string) bool { return b.serverOf(tool) != nil }

// toolsCache keeps each server's tool list in .pml/tools-cache.json, keyed
// by its configuration, so a later session lists them without a start.
type toolsCache struct {
	path string
	mu   sync.Mutex
}

type cachedTools struct {
	Spec  string      `json:"spec"`
	Tools []*mcp.Tool `json:"tools"`
}

func specKey(cfg config.Server) string {
	b, _ := json.Marshal(cfg)
	return fmt.Sprintf("%x", sha256Sum(b))
}

// root is the workspace of the cache file <workspace>/.pml/tools-cache.json:
// the file is never read or written through a link below it.
func (c *toolsCache) root() string { return filepath.Dir(filepath.Dir(c.path)) }

func (c *toolsCache) read() map[string]cachedTools {
	m := map[string]cachedTools{}
	if b, err := safefs.ReadFile(c.root(), c.path, safefs.MaxConfig); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

func (c *toolsCache) get(cfg config.Server) ([]*mcp.Tool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.read()[cfg.Name]
	if !ok || e.Spec != specKey(cfg) || len(e.Tools) == 0 {
		return nil, false
	}
	return e.Tools, true
}

func (c *toolsCache) put(cfg config.Server, tools []*mcp.Tool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.read()
	m[cfg.Name] = cachedTools{Spec: specKey(cfg), Tools: tools}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return
	}
	if err := safefs.MkdirAll(c.root(), filepath.Dir(c.path), 0o755); err == nil {
		_ = safefs.WriteFile(c.root(), c.path, append(b, '\n'), 0o644)
	}
}

func timeDuration(d policies.Duration) time.Duration { return time.Duration(d) }

func policiesDuration(d time.Duration) policies.Duration { return policies.Duration(d) }

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }

func (b *Broker) hasTool(name string) bool {
	b.toolsMu.RLock()
	defer b.toolsMu.RUnlock()
	_, ok := b.tools[name]
	return ok
}

// PreinstallApproved installs the dependencies of every configured server
// whose tools are allowed outright (permissions.allow matches "name:*"),
// for `pml images pull`: later runs then need no network. Servers whose
// install is not approved are reported, not installed.
func (b *Broker) PreinstallApproved(ctx context.Context) ([]images.DepResult, error) {
	var out []images.DepResult
	for _, srv := range b.serverList() {
		if srv.cfg.Install == nil {
			continue
		}
		r := images.DepResult{Server: srv.cfg.Name}
		switch d, _ := b.decide(srv.cfg.Name + ":*"); {
		case b.deps.Installed(srv.cfg):
			r.Status = "present"
		case d != Allow:
			r.Status = "needs approval (allow \"" + srv.cfg.Name + ":*\" in .pml.json, or call one of its tools once and approve the install)"
		default:
			if err := b.install(ctx, srv); err != nil {
				r.Status, r.Err = "failed", err
			} else {
				r.Status = "installed"
			}
		}
		out = append(out, r)
	}
	return out, nil
}
