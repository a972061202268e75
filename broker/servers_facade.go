package broker

import (
	"context"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/config"
)

// The part of the facade cmd/pml and the MCP surface use that the server
// set answers (servers.go): each delegates to b.srv.

// LoadServers registers the tools of every installed server (tools/list);
// see tools.Servers.LoadServers. The added capabilities' tools come
// first: they load from disk; then the registry's stdio servers this
// workspace fetched are made known (tools.Registry.LoadServers, which
// may wait for a registry), and all the servers load.
func (b *Broker) LoadServers(ctx context.Context) {
	b.caps.LoadAdded()
	b.registry.LoadServers(ctx)
	b.srv.LoadServers(ctx)
}

// LoadAddedCapabilities lists the added capabilities' tools (and those
// .pml.json names) from the lockfile and the cache, never the network:
// pml call runs one as pml stdio does.
func (b *Broker) LoadAddedCapabilities() { b.caps.LoadAdded() }

// InstallNewServer installs and lists a server not (yet) in .pml.json
// (pml add); see tools.Servers.InstallNewServer.
func (b *Broker) InstallNewServer(ctx context.Context, cfg config.Server) ([]tl.Tool, error) {
	return b.srv.InstallNewServer(ctx, cfg)
}

// PreinstallApproved installs the dependencies of the servers whose tools
// are allowed outright (pml images pull); see
// tools.Servers.PreinstallApproved.
func (b *Broker) PreinstallApproved(ctx context.Context) ([]images.DepResult, error) {
	return b.srv.PreinstallApproved(ctx)
}

// ListedTools is every tool a client would be shown, with its wire name;
// see tools.Servers.ListedTools.
func (b *Broker) ListedTools() []tl.Listed { return b.srv.ListedTools() }

// HeldTool says how tool's definition drifted from the one accepted
// (toolpin: "changed" or "new", and what of it changed); "" when it is
// not held.
func (b *Broker) HeldTool(tool string) (change string, parts []string) {
	dr := b.srv.Table.Held(tool)
	if dr == nil {
		return "", nil
	}
	return string(dr.State), dr.Parts()
}

// Tools lists every tool, in a stable order, ending with
// pml:continue_workflow.
func (b *Broker) Tools() []tl.Tool { return b.srv.Tools() }

// OnToolsChanged registers a listener for tools added or removed at run
// time (servers loaded, list_changed).
func (b *Broker) OnToolsChanged(f func(added []tl.Tool, removed []string)) { b.srv.OnToolsChanged(f) }

// ListServersLive lists every configured server's tools (and prompts)
// from the servers themselves, never from the tools cache: the added
// capabilities and registry servers are made known first, as
// LoadServers does. It returns why each server that could not be listed
// was not (nil for those listed). See tools.Servers.ListLive.
func (b *Broker) ListServersLive(ctx context.Context) map[string]error {
	b.caps.LoadAdded()
	b.registry.LoadServers(ctx)
	errs := b.srv.ListLive(ctx)
	b.srv.Offers(ctx)
	return errs
}
