package broker

import (
	"context"
	"fmt"
	"strings"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/wirename"
)

// InstallServer runs the install step of the configured server name (the
// person consented to it on the command line: pml add) and registers its
// tools, from the tools cache or by starting the server once. It returns
// the server's tools.
func (b *Broker) InstallServer(ctx context.Context, name string) ([]Tool, error) {
	srv := b.serverOf(name + ":")
	if srv == nil {
		return nil, fmt.Errorf("%w: %s is not a server in .pml.json (or its entry is not trusted: pml trust)", ErrNotFound, name)
	}
	if !b.deps.Installed(srv.cfg) {
		if err := b.install(ctx, srv); err != nil {
			return nil, err
		}
	}
	if err := b.loadServer(ctx, srv); err != nil {
		return nil, err
	}
	return b.ServerTools(name), nil
}

// ServerTools lists the registered tools of server name.
func (b *Broker) ServerTools(name string) []Tool {
	var out []Tool
	for _, t := range b.tools.list() {
		if strings.HasPrefix(t.Name, name+":") {
			out = append(out, t)
		}
	}
	return out
}

// ServerState is how a configured server stands, for pml list.
type ServerState struct {
	Name   string `json:"name"`
	Source string `json:"source"` // "npm PACKAGE@VERSION", "image REF"
	Image  string `json:"image"`
	// Installed: its install step ran with its current spec (or it has
	// none).
	Installed bool `json:"installed"`
	// ImagePresent: the engine has its image (false also when the engine
	// could not be asked: EngineErr says why).
	ImagePresent bool `json:"image_present"`
	// Running: a pooled container of it runs for this workspace (any pml
	// process's).
	Running bool `json:"running"`
	// Tools is how many tools its cached list has (0: not listed yet).
	Tools     int    `json:"tools"`
	Private   bool   `json:"private,omitempty"`
	EngineErr string `json:"engine_error,omitempty"`
}

// Servers lists the configured servers (mcps, private_mcps) and how each
// stands; it asks the engine about images and running containers.
func (b *Broker) Servers(ctx context.Context) []ServerState {
	running := map[string]bool{}
	var engineErr string
	if list, err := b.sb.rt.ListManaged(ctx); err != nil {
		engineErr = err.Error()
	} else {
		for _, m := range list {
			if m.Running && m.Labels[container.LabelWorkspace] == b.sb.ws {
				running[m.Labels[container.LabelPurpose]] = true
			}
		}
	}
	var out []ServerState
	for _, srv := range b.serverList() {
		tools, _ := b.toolsCache.get(srv.cfg)
		st := ServerState{Name: srv.cfg.Name, Source: sourceOf(srv.cfg), Image: srv.cfg.Image, Installed: b.deps.Installed(srv.cfg),
			Running: running["mcp:"+srv.cfg.Name], Tools: len(tools), Private: srv.cfg.Private, EngineErr: engineErr}
		if engineErr == "" {
			st.ImagePresent, _ = b.sb.rt.ImageExists(ctx, srv.cfg.Image)
		}
		out = append(out, st)
	}
	return out
}

// sourceOf says where a server comes from: its npm package and version,
// or its image.
func sourceOf(cfg config.Server) string {
	if in := cfg.Install; in != nil && in.Command == "npm" && len(in.Args) > 0 {
		return "npm " + in.Args[len(in.Args)-1]
	}
	if in := cfg.Install; in != nil {
		return in.Command + " " + strings.Join(in.Args, " ")
	}
	return "image " + cfg.Image
}

// Listed is a tool as a client sees it: its wire name and pml's.
type Listed struct {
	Tool
	Wire string
}

// ListedTools is every tool a client would be shown (permissions.deny
// hides a tool), each with its wire name, in listing order; servers'
// tools are those registered (LoadServers loads them, from the cache
// where it can).
func (b *Broker) ListedTools() []Listed {
	var out []Listed
	for _, t := range b.Tools() {
		if t.Name != ContinueTool {
			if d, _ := b.decide(t.Name); d == Deny {
				continue
			}
		}
		out = append(out, Listed{Tool: t, Wire: wirename.Encode(t.Name)})
	}
	return out
}
