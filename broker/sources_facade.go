package broker

import (
	"context"

	"github.com/pml-dev/pml/broker/call"
	sbx "github.com/pml-dev/pml/broker/sandbox"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/toolbox"
)

// The part of the facade the sources (broker/tools) answer: cmd/pml's
// names for their types and files, and the *Broker methods that hand to
// them.

// Known lists the tools of workspace with configuration cfg as far as pml
// knows them without starting a server or contacting the cloud
// (tools.Known): pml's own, the servers' cached lists, the cloud's.
func Known(workspace string, cfg *config.Config) tl.KnownTools {
	names := make([]string, 0, len(toolbox.Filesystem)+3)
	for _, t := range toolbox.Filesystem {
		names = append(names, t.Name)
	}
	return tl.Known(workspace, cfg, append(names, sbx.ShellTool.Name, call.ContinueTool, ExecuteTool))
}

// AddCapability fetches, locks, installs and records a capability.
func (b *Broker) AddCapability(ctx context.Context, arg string, confirm tl.Confirm) (tl.Capability, error) {
	return b.caps.AddCapability(ctx, arg, confirm)
}

// StartCloud syncs the routing table and the cloud's tool list in the
// background. It never blocks: initialize must not wait for the network.
// In local mode (no PML_API_KEY) pml does not contact the cloud at all.
func (b *Broker) StartCloud(ctx context.Context) { b.cloud.StartCloud(ctx) }

// List says how everything pml serves here stands. version is pml's own,
// for its built-in group. It never fails: what cannot be known is said.
func (b *Broker) List(ctx context.Context, caps []tl.Capability, version string) tl.Listing {
	return b.lister.List(ctx, caps, version)
}

// Servers lists the configured servers (mcps, private_mcps) and how each
// stands; it asks the engine about images and running containers.
func (b *Broker) Servers(ctx context.Context) []tl.ServerState { return b.lister.Servers(ctx) }
