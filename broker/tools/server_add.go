package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/wirename"
)

// InstallServer runs the install step of the configured server name (the
// person consented to it on the command line: pml add) and registers its
// tools, from the tools cache or by starting the server once. It returns
// the server's tools.
func (s *Servers) InstallServer(ctx context.Context, name string) ([]Tool, error) {
	srv := s.ServerOf(name + ":")
	if srv == nil {
		return nil, fmt.Errorf("%w: %s is not a server in .pml.json (or its entry is not trusted: pml trust)", call.ErrNotFound, name)
	}
	if !s.Deps.Installed(srv.Cfg) {
		if err := s.Install(ctx, srv); err != nil {
			return nil, err
		}
	}
	if err := s.loadServer(ctx, srv); err != nil {
		return nil, err
	}
	return s.ServerTools(name), nil
}

// InstallNewServer is InstallServer for a server not (yet) in .pml.json:
// pml add installs and lists it before it writes the entry, so that an
// add that fails or is killed leaves .pml.json as it was. cfg is the
// entry as pml add will write it; a configured server of that name is an
// error.
func (s *Servers) InstallNewServer(ctx context.Context, cfg config.Server) ([]Tool, error) {
	if s.ServerOf(cfg.Name+":") != nil {
		return nil, fmt.Errorf("%s is already a server here: choose another name with --name", cfg.Name)
	}
	s.Add(cfg)
	return s.InstallServer(ctx, cfg.Name)
}

// ServerTools lists the registered tools of server name.
func (s *Servers) ServerTools(name string) []Tool {
	var out []Tool
	for _, t := range s.Table.List() {
		if strings.HasPrefix(t.Name, name+":") {
			out = append(out, t)
		}
	}
	return out
}

// ListedTools is every tool a client would be shown (permissions.deny
// hides a tool), each with its wire name, in listing order; servers'
// tools are those registered (LoadServers loads them, from the cache
// where it can).
func (s *Servers) ListedTools() []Listed {
	var out []Listed
	for _, t := range s.Tools() {
		if t.Name != call.ContinueTool {
			if d, _ := s.perms.Decide(t.Name); d == call.Deny {
				continue
			}
		}
		out = append(out, Listed{Tool: t, Wire: wirename.Encode(t.Name)})
	}
	return out
}

// Installed reports whether cfg's install step has run here (and still
// matches its pin), or it has none.
func (s *Servers) Installed(cfg config.Server) bool { return s.Deps.Installed(cfg) }
