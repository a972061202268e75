package broker

import (
	"context"

	sbx "github.com/pml-dev/pml/broker/sandbox"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/toolbox"
)

// The part of the facade the sources (broker/tools) answer: cmd/pml's
// names for their types and files, and the *Broker methods that hand to
// them.

// Capabilities, the listing and a server's files (broker/tools).
type (
	Capability      = tl.Capability
	Requirement     = tl.Requirement
	Confirm         = tl.Confirm
	Leftover        = tl.Leftover
	Health          = tl.Health
	BuiltinState    = tl.BuiltinState
	ServerState     = tl.ServerState
	CapabilityState = tl.CapabilityState
	Listing         = tl.Listing
	KnownTools      = tl.KnownTools
)

const (
	CapabilitiesFile = tl.CapabilitiesFile
	SourceBuiltin    = tl.SourceBuiltin
	SourceConfig     = tl.SourceConfig
	SourceNPM        = tl.SourceNPM
	SourceOCI        = tl.SourceOCI
)

var (
	// ErrCloud: a server-routed call could not be forwarded; ErrRefused:
	// the person said no to an approval pml add needed.
	ErrCloud   = tl.ErrCloud
	ErrRefused = tl.ErrRefused

	CapabilityFQDN      = tl.CapabilityFQDN
	LoadCapabilities    = tl.LoadCapabilities
	CheckedCapabilities = tl.CheckedCapabilities
	RemoveCapability    = tl.RemoveCapability
	SortedCapabilities  = tl.SortedCapabilities
	ServerFiles         = tl.ServerFiles
	Unreferenced        = tl.Unreferenced
	RemoveLeftovers     = tl.RemoveLeftovers
)

// Known lists the tools of workspace with configuration cfg as far as pml
// knows them without starting a server or contacting the cloud
// (tools.Known): pml's own, the servers' cached lists, the cloud's.
func Known(workspace string, cfg *config.Config) KnownTools {
	names := make([]string, 0, len(toolbox.Filesystem)+3)
	for _, t := range toolbox.Filesystem {
		names = append(names, t.Name)
	}
	return tl.Known(workspace, cfg, append(names, sbx.ShellTool.Name, ContinueTool, ExecuteTool))
}

// AddCapability fetches, locks, installs and records a capability.
func (b *Broker) AddCapability(ctx context.Context, arg string, confirm Confirm) (Capability, error) {
	return b.caps.AddCapability(ctx, arg, confirm)
}

// StartCloud syncs the routing table and the cloud's tool list in the
// background. It never blocks: initialize must not wait for the network.
// In local mode (no PML_API_KEY) pml does not contact the cloud at all.
func (b *Broker) StartCloud(ctx context.Context) { b.cloud.StartCloud(ctx) }

// List says how everything pml serves here stands. version is pml's own,
// for its built-in group. It never fails: what cannot be known is said.
func (b *Broker) List(ctx context.Context, caps []Capability, version string) Listing {
	return b.lister.List(ctx, caps, version)
}

// Servers lists the configured servers (mcps, private_mcps) and how each
// stands; it asks the engine about images and running containers.
func (b *Broker) Servers(ctx context.Context) []ServerState { return b.lister.Servers(ctx) }
