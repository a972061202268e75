package tools

import (
	"context"
	"strings"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/internal/npmspec"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/shim"
)

// What pml list shows: everything pml serves in the workspace (its own
// tool groups, the servers of .pml.json, the capabilities added from a
// registry), each with where it comes from, its version and how it stands
// on this machine. Nothing here starts, pulls or fetches anything: the
// engine is asked what it has and runs, the registry cache and
// .pml/deps.json are read.

// Sources of what pml serves.
const (
	SourceBuiltin = "built-in"
	SourceConfig  = ".pml.json"
	SourceNPM     = "npm"
	SourceOCI     = "oci"
)

// Health is how one thing pml serves stands here.
type Health struct {
	// Image is the image its containers run ("": none of its own).
	Image string `json:"image,omitempty"`
	// Install is deps.StatusInstalled, StatusOutdated or StatusMissing for
	// a server with an install step (in .pml/deps, with the spec and
	// integrity pinned now), deps.StatusNone without one; "" for what has
	// no server.
	Install string `json:"install,omitempty"`
	// Installed: Install is installed or none.
	Installed bool `json:"installed"`
	// ImagePresent: the engine has Image. Absent when there is no image,
	// or the engine could not be asked (EngineErr says why).
	ImagePresent *bool `json:"image_present,omitempty"`
	// Running: a container of it, pooled by a live pml of this workspace,
	// runs now (pml's labels: workspace, purpose, owner). Absent when
	// it has no long-lived container or the engine could not be asked.
	Running *bool `json:"running,omitempty"`
	// EngineErr: the engine could not be asked; the two above are unknown.
	EngineErr string `json:"engine_error,omitempty"`
}

// BuiltinState is one group of pml's own tools.
type BuiltinState struct {
	Name  string `json:"name"`
	Tools int    `json:"tools"`
	// Source is always SourceBuiltin; Runs says in what.
	Source  string `json:"source"`
	Runs    string `json:"runs"`
	Version string `json:"version,omitempty"`
	Health
}

// ServerState is how a configured server stands, for pml list.
type ServerState struct {
	Name string `json:"name"`
	// Source is SourceNPM (Package is the npm package), SourceOCI (an
	// image pinned by digest, Package its repository) or SourceConfig (a
	// server written by hand: its image and command are in .pml.json).
	Source  string `json:"source"`
	Package string `json:"package,omitempty"`
	// Version is the npm version, or the image's digest, short.
	Version string `json:"version,omitempty"`
	Health
	// Tools is how many tools its cached list has (0: not listed yet).
	Tools   int  `json:"tools"`
	Private bool `json:"private,omitempty"`
}

// CapabilityState is an added capability and how it stands.
type CapabilityState struct {
	Capability
	// Source is the registry that served it (from the registry cache;
	// "" when no copy is cached), Version its locked hash.
	Source  string `json:"source"`
	Version string `json:"version"`
	// Package is its npm package@version when it installs one.
	Package string `json:"package,omitempty"`
	Health
	// ToolCount: the tools of a stdio server's cached list, else those
	// its entry names.
	ToolCount int `json:"tool_count"`
	// Note says what the state cannot: it runs in the PML cloud, per
	// call, or its entry is not cached here.
	Note string `json:"note,omitempty"`
}

// Listing is everything pml list shows.
type Listing struct {
	Builtin      []BuiltinState    `json:"builtin"`
	Servers      []ServerState     `json:"servers"`
	Capabilities []CapabilityState `json:"capabilities"`
	// EngineErr: the container engine could not be asked (why); every
	// image and running state above is unknown.
	EngineErr string `json:"engine_error,omitempty"`
}

// listEngineTimeout bounds the engine's answers for a listing: an engine
// that hangs makes the state unknown, not pml list.
const listEngineTimeout = 10 * time.Second

// Lister answers pml list and pml tools' server states. It holds what it
// reads, never the *Broker. Safe for concurrent use.
type Lister struct {
	sb  Sandbox
	cfg *config.Config
	// toolbox is the filesystem tools' image.
	toolbox *images.Toolbox
	// servers are the configured servers, their installs, cached tool
	// lists and the tool table.
	servers *Servers
	// registry reads a capability's cached entry.
	registry *Registry
}

// NewLister makes the listing of what sb's workspace serves.
func NewLister(sb Sandbox, cfg *config.Config, toolbox *images.Toolbox, servers *Servers, registry *Registry) *Lister {
	return &Lister{sb: sb, cfg: cfg, toolbox: toolbox, servers: servers, registry: registry}
}

// List says how everything pml serves here stands. version is pml's own,
// for its built-in group. It never fails: what cannot be known is said.
func (l *Lister) List(ctx context.Context, caps []Capability, version string) Listing {
	ctx, cancel := context.WithTimeout(ctx, listEngineTimeout)
	defer cancel()
	v := l.viewEngine(ctx)
	out := Listing{Builtin: l.builtinStates(ctx, v, version), Servers: []ServerState{}, Capabilities: []CapabilityState{}}
	for _, srv := range l.servers.List() {
		out.Servers = append(out.Servers, l.serverState(ctx, v, srv.Cfg))
	}
	for _, c := range caps {
		out.Capabilities = append(out.Capabilities, l.capabilityState(ctx, v, c))
	}
	if v.err != nil {
		out.EngineErr = v.err.Error()
	}
	return out
}

// Servers lists the configured servers (mcps, private_mcps) and how each
// stands; it asks the engine about images and running containers.
func (l *Lister) Servers(ctx context.Context) []ServerState {
	ctx, cancel := context.WithTimeout(ctx, listEngineTimeout)
	defer cancel()
	v := l.viewEngine(ctx)
	out := []ServerState{}
	for _, srv := range l.servers.List() {
		out = append(out, l.serverState(ctx, v, srv.Cfg))
	}
	return out
}

// engineView is what the engine said, asked once per listing.
type engineView struct {
	rt  container.Runtime
	err error
	// running holds the purposes (pml.purpose) of this workspace's
	// running containers whose pml is alive, other than this process's.
	running map[string]bool
	images  map[string]bool
}

func (l *Lister) viewEngine(ctx context.Context) *engineView {
	v := &engineView{rt: l.sb.Runtime(), running: map[string]bool{}, images: map[string]bool{}}
	list, err := v.rt.ListManaged(ctx)
	if err != nil {
		v.err = err
		return v
	}
	for _, m := range list {
		if !m.Running {
			continue
		}
		// A standby a session claimed: its labels name the session that
		// made it, the claim record the one that serves from it.
		owner := m.Labels
		if m.Labels[container.LabelStandby] != "" {
			claim, err := shim.ReadClaim(shim.BaseDir(), m.StandbyDir)
			if err != nil {
				continue // not claimed (or not by this user): no one's server
			}
			owner = claim
		}
		if owner[container.LabelWorkspace] != l.sb.Workspace() {
			continue
		}
		// A container whose pml died is an orphan the next start
		// removes, not a server anyone can call.
		if o, ok := container.OwnerFromLabels(owner); ok && o != l.sb.Owner() && liveOwner(l.sb.Owner(), o) {
			v.running[m.Labels[container.LabelPurpose]] = true
		}
	}
	return v
}

// liveOwner reports whether the pml that owns a container still runs, as
// container.Reap judges it: by pid and start time on this host; another
// host's pml cannot be judged from here, so its running container is
// taken at the engine's word.
func liveOwner(self, o container.Owner) bool {
	switch {
	case o.HostID == "":
		return o.Host != self.Host || o.Alive()
	case o.HostID == self.HostID:
		return o.Alive()
	}
	return true
}

// health fills in the image and running states of image, whose pooled
// containers are labelled purpose ("" : none is long-lived).
func (v *engineView) health(ctx context.Context, image, purpose string) Health {
	h := Health{Image: image, Installed: true}
	if v.err != nil {
		h.EngineErr = v.err.Error()
		return h
	}
	if image != "" {
		present, ok := v.images[image]
		if !ok {
			var err error
			present, err = v.rt.ImageExists(ctx, image)
			if err != nil {
				// Asked a moment ago, the engine answered: this one
				// image is unknown, the rest stands.
				h.EngineErr = err.Error()
				return h
			}
			v.images[image] = present
		}
		h.ImagePresent = &present
	}
	if purpose != "" {
		running := v.running[purpose]
		h.Running = &running
	}
	return h
}

func (l *Lister) builtinStates(ctx context.Context, v *engineView, version string) []BuiltinState {
	isServer := map[string]bool{}
	for _, s := range l.servers.List() {
		isServer[s.Cfg.Name] = true
	}
	var out []BuiltinState
	idx := map[string]int{}
	for _, t := range l.servers.Tools() {
		ns, _, _ := strings.Cut(t.Name, ":")
		if isServer[ns] || t.Name == call.ContinueTool {
			continue
		}
		i, ok := idx[ns]
		if !ok {
			i = len(out)
			idx[ns] = i
			out = append(out, l.builtinState(ctx, v, ns, version))
		}
		out[i].Tools++
	}
	if out == nil {
		out = []BuiltinState{}
	}
	return out
}

// builtinState is one of pml's own groups: the filesystem tools run in
// pml's toolbox image (built from pml itself), shell:exec in
// sandbox.shell_image, pml's own tools in pml.
func (l *Lister) builtinState(ctx context.Context, v *engineView, ns, version string) BuiltinState {
	s := BuiltinState{Name: ns, Source: SourceBuiltin}
	switch ns {
	case "filesystem":
		s.Runs = "pml's toolbox image"
		if v.err != nil {
			s.Health = v.health(ctx, "", "")
			break
		}
		// Its tag is a digest of pml's in-container program; the image
		// is built from pml on first use (or by pml images pull).
		ref, err := l.toolbox.Ref(ctx)
		if err != nil {
			s.Health = Health{Installed: true, EngineErr: err.Error()}
			break
		}
		s.Health = v.health(ctx, ref, "pool:toolbox")
		s.Version = imageVersion(ref)
	case "shell":
		s.Runs = "sandbox.shell_image"
		img := l.cfg.Sandbox.ShellImage
		s.Health = v.health(ctx, img, "pool:shell")
		s.Version = imageVersion(img)
	default:
		s.Runs = "pml itself"
		s.Version = version
		s.Health = Health{Installed: true}
	}
	return s
}

func (l *Lister) serverState(ctx context.Context, v *engineView, cfg config.Server) ServerState {
	tools, _ := l.servers.Cache.Get(cfg)
	st := ServerState{Name: cfg.Name, Tools: len(tools), Private: cfg.Private}
	st.Source, st.Package, st.Version = serverSource(cfg)
	st.Health = v.health(ctx, cfg.Image, "mcp:"+cfg.Name)
	l.installHealth(&st.Health, cfg)
	return st
}

// installHealth adds the state of cfg's install step to h.
func (l *Lister) installHealth(h *Health, cfg config.Server) {
	h.Install = l.servers.Deps.Status(cfg)
	h.Installed = h.Install == deps.StatusInstalled || h.Install == deps.StatusNone
}

// serverSource says where a server comes from: an npm package (the
// version pinned in its install line), an image pinned by digest, or an
// entry written by hand.
func serverSource(cfg config.Server) (source, pkg, version string) {
	if in := cfg.Install; in != nil && in.Command == "npm" && len(in.Args) > 0 {
		spec := in.Args[len(in.Args)-1]
		name := npmspec.Name(spec)
		return SourceNPM, name, strings.TrimPrefix(spec[len(name):], "@")
	}
	if repo, digest, ok := strings.Cut(cfg.Image, "@"); ok && cfg.Install == nil {
		return SourceOCI, repo, shortDigest(digest)
	}
	return SourceConfig, "", imageVersion(cfg.Image)
}

// imageVersion is what names an image's version: its digest, short, or
// its tag.
func imageVersion(ref string) string {
	if _, digest, ok := strings.Cut(ref, "@"); ok {
		return shortDigest(digest)
	}
	// The tag follows the last ':' after the last '/' (a registry's
	// port comes before it).
	last := ref[strings.LastIndex(ref, "/")+1:]
	if _, tag, ok := strings.Cut(last, ":"); ok {
		return tag
	}
	return "latest"
}

// shortDigest is "sha256:" and the first 12 hex digits, as docker shows
// image ids.
func shortDigest(d string) string {
	algo, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) <= 12 {
		return d
	}
	return algo + ":" + hex[:12]
}

// capabilityState reads the capability's locked entry from the registry
// cache (no registry is asked) to say where it came from and, for a
// stdio server, how its install, image and container stand.
func (l *Lister) capabilityState(ctx context.Context, v *engineView, c Capability) CapabilityState {
	st := CapabilityState{Capability: c, Health: Health{Installed: true}, ToolCount: len(c.Tools)}
	if f, err := registry.ParseFQDN(c.FQDN); err == nil {
		st.Version = f.Hash
	}
	if c.Routing == registry.RoutingServer || c.Type == registry.TypeHTTP {
		st.Note = "runs in the PML cloud"
	}
	var e *registry.Entry
	var err error
	if l.registry.client == nil {
		err = l.registry.lockErr
	} else {
		e, err = l.registry.client.Cached(c.FQDN)
	}
	switch {
	case err != nil:
		st.Note = joinNote(st.Note, "its registry entry cannot be read here: "+err.Error())
		return st
	case e == nil:
		st.Note = joinNote(st.Note, "no copy of its registry entry is cached here: run `pml add "+c.Name+"` again")
		return st
	}
	st.Source = e.Registry
	switch {
	case c.Type == registry.TypeDeno:
		st.Health = v.health(ctx, execute.DefaultImage, "")
		st.Note = joinNote(st.Note, "runs per call")
	case c.Type == registry.TypeStdio && st.Note == "":
		cfg, err := registry.ServerConfig(e)
		if err != nil {
			st.Note = err.Error()
			return st
		}
		if _, pkg, version := serverSource(cfg); pkg != "" && cfg.Install != nil {
			st.Package = pkg + "@" + version
		}
		st.Health = v.health(ctx, cfg.Image, "mcp:"+cfg.Name)
		l.installHealth(&st.Health, cfg)
		if tools, ok := l.servers.Cache.Get(cfg); ok {
			st.ToolCount = len(tools)
		}
	}
	return st
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
