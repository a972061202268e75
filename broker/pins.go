package broker

import (
	"os"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/toolpin"
)

// pinsOf opens the workspace's pinned tool definitions (internal/toolpin,
// in the person's state directory) and makes the tool table hold every
// listed tool that drifted from them, each server under its tool_changes
// policy. Without a state directory nothing is pinned (and said once):
// the project's trust needs one too; pins that cannot be read hold every
// tool of the server (Table.holds).
func pinsOf(b *Broker, ws string, pins tl.Pinner) *tl.ToolPins {
	p := &tl.ToolPins{Table: &b.srv.Table, Fresh: b.srv.Fresh, Unlisted: b.srv.CheckUnlisted}
	policy := func(server string) string {
		if srv := b.srv.ServerOf(server + ":"); srv != nil && srv.Cfg.ToolChanges != "" {
			return srv.Cfg.ToolChanges
		}
		return tl.PolicyHold
	}
	onErr := func(server string, err error) {
		b.log.Warn().Str("server", termsafe.Quote(server, 0)).Err(err).Msg("the tool definitions of a server could not be checked against their pins; every tool of it is held until they can be")
	}
	if pins != nil {
		// The caller's (pml lock --check lists the servers through one
		// that records what they say and pins nothing).
		b.srv.Table.SetPins(pins, policy, onErr)
		return p
	}
	store, err := toolpin.Open(ws, os.Getenv)
	if err != nil {
		b.log.Warn().Err(err).Msg("tool definitions are not pinned: a server's changed or new tool is not held")
		return p
	}
	// The project's committed lock (toolpin.LockName) records what the
	// person pinned; it vouches for nothing, so failing to write it
	// holds nothing: it is said.
	store.OnCommitErr = func(err error) {
		b.log.Warn().Err(err).Msg("the project's committed lock of tool definitions (" + toolpin.LockName + ")")
	}
	b.srv.Table.SetPins(store, policy, onErr)
	return p
}
