package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/toolbox"
)

// A capability's mcp_deps (seed 000 story 14.10 AC2, seed 002) are the
// MCP servers its code calls as mcp.NAME.action(). pml add installs each
// as a server of the project, the way pml add npm: does: pinned by the
// integrity the registry gives, in a container, recorded in .pml.json's
// mcps (cmd/pml writes the entry, trusted as the person asked for it).
// From then on it is a server like any other: its tools go through the
// whole request path when the capability calls them.

// Requirement is one server a capability needs, as pml add readied it.
type Requirement struct {
	Name string `json:"name"`
	// Configured is true when the project already had a server of that
	// name: it is used as it is (local configuration wins).
	Configured bool `json:"configured,omitempty"`
	// Grants is what the server's container gets, in the words of the
	// approval to run it (image, workspace, variables, network).
	Grants string `json:"grants"`
	// EnvRequired are the variables the server needs (names only).
	EnvRequired []string `json:"env_required,omitempty"`
	// Server is the mcps entry pml add records for a new dependency
	// (nil when Configured).
	Server *config.Server `json:"-"`
}

// readyDeps readies e's mcp_deps for the capability c: a configured
// server of the same name is used as it is; any other is added (in this
// process) and, once confirmed, installed. c.Requires lists them all.
func (cs *Capabilities) readyDeps(ctx context.Context, e *registry.Entry, c *Capability, confirm Confirm) error {
	if e.Meta == nil || len(e.Meta.McpDeps) == 0 {
		return nil
	}
	names := make([]string, 0, len(e.Meta.McpDeps))
	for _, d := range e.Meta.McpDeps {
		names = append(names, d.Name)
	}
	// Said before anything is installed, as the seeds' pml add does.
	cs.log.Info().Msg(fmt.Sprintf("%s requires: %s", c.Name, strings.Join(names, ", ")))
	for _, d := range e.Meta.McpDeps {
		// A server of that name configured here is used as it is (its
		// install too, when it has one): the project's configuration wins,
		// as it does over a registry server.
		srv := cs.servers.ServerOf(d.Name + ":")
		configured := srv != nil
		if !configured {
			cfg, err := registry.DepServer(e, d)
			if err != nil {
				return fmt.Errorf("%w: %w", call.ErrInvalidInput, err)
			}
			srv = cs.servers.Add(cfg)
		}
		if err := cs.installDep(ctx, srv, c.Name, confirm); err != nil {
			return err
		}
		r := Requirement{Name: d.Name, Configured: configured, Grants: cs.accessSentence(srv.Cfg), EnvRequired: srv.Cfg.EnvRequired}
		if !configured {
			cfg := srv.Cfg
			r.Server = &cfg
		}
		c.Requires = append(c.Requires, r)
	}
	return nil
}

// installDep installs srv, once the person confirmed, unless it is.
func (cs *Capabilities) installDep(ctx context.Context, srv *Server, capName string, confirm Confirm) error {
	if srv.Cfg.Install == nil || cs.servers.Installed(srv.Cfg) {
		return nil
	}
	wf := &workflow.Workflow{Type: workflow.ApprovalDependency, Tool: srv.Cfg.Name + ":*"}
	if !confirm(cs.Ask.DependencyApproval(wf, srv.Cfg)) {
		return fmt.Errorf("%w: installing %s (which %s requires) was not approved; nothing was recorded", ErrRefused, srv.Cfg.Name, capName)
	}
	if err := cs.servers.Install(ctx, srv); err != nil {
		return fmt.Errorf("installing %s, which %s requires: %w", srv.Cfg.Name, capName, err)
	}
	return nil
}

// accessSentence is the access sentence of a server's approval, without its
// leading space.
func (cs *Capabilities) accessSentence(cfg config.Server) string {
	return strings.TrimSpace(approve.AccessSentence(cs.Ask.ServerAccess(cfg), map[string]any{}))
}

// depsMissing says which of e's mcp_deps cannot run here, and how to fix
// it: each must be a server of the project, installed. nil when all are.
func (cs *Capabilities) depsMissing(name string, e *registry.Entry) error {
	if e == nil || e.Meta == nil {
		return nil
	}
	var missing []string
	for _, d := range e.Meta.McpDeps {
		srv := cs.servers.ServerOf(d.Name + ":")
		switch {
		case srv == nil:
			missing = append(missing, d.Name+" (not a server in .pml.json, or its entry is not trusted)")
		case srv.Cfg.Install != nil && !cs.servers.Installed(srv.Cfg):
			missing = append(missing, d.Name+" (not installed)")
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s requires the MCP servers %s: run `pml add %s` again to install them", call.ErrNotFound, name, strings.Join(missing, ", "), name)
}

// refusedExec answers every call of a capability that cannot run with
// why (depsMissing), instead of running half of it.
type refusedExec struct{ err error }

func (r refusedExec) Run(context.Context, *call.Call, toolbox.Tool, map[string]any) call.Result {
	return call.ResultFor(r.err)
}
