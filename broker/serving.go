package broker

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	sbx "github.com/pml-dev/pml/broker/sandbox"
	tl "github.com/pml-dev/pml/broker/tools"
)

// Serving is the Broker as the MCP surface (package mcpserve, above this
// one) sees it: what stdio, Streamable HTTP, the fast path and the roots
// read of a broker, and nothing else. It implements mcpserve.Backend; it
// is a value (two are equal when they serve the same Broker), got from
// Broker.Serving. Its methods read the Broker's pieces at the moment they
// are called (the log, the HIL timeout and the permissions change with a
// reload).
type Serving struct{ b *Broker }

// Serving is the broker for the MCP surface (mcpserve.Backend).
func (b *Broker) Serving() Serving { return Serving{b} }

// Workspace is the workspace directory.
func (s Serving) Workspace() string { return s.b.Workspace() }

// WorkspaceExplicit: the person named the workspace (PML_WORKSPACE), so
// the client's roots neither move nor are compared with it.
func (s Serving) WorkspaceExplicit() bool { return s.b.wsExplicit }

// Log is pml's log (zerolog's methods take a pointer).
func (s Serving) Log() *zerolog.Logger { return &s.b.log }

// ApprovalTimeout is how long a pending approval lives (hil.timeout):
// a session's workflows expire after it, and a dialog waits part of it.
func (s Serving) ApprovalTimeout() time.Duration { return s.b.cfg.HIL.Timeout }

// Tools is every tool known now, pml:continue_workflow included.
func (s Serving) Tools() []tl.Tool { return s.b.Tools() }

// OnToolsChanged registers f, told when tools appear, change or go (and
// when the permissions that decide the listing changed).
func (s Serving) OnToolsChanged(f func(added []tl.Tool, removed []string)) { s.b.OnToolsChanged(f) }

// Decide is what the permissions in force say of a tool (a denied tool is
// not listed).
func (s Serving) Decide(name string) call.Decision {
	d, _ := s.b.perms.Decide(name)
	return d
}

// Call runs a call down the request path.
func (s Serving) Call(ctx context.Context, r call.Request) call.Result { return s.b.Call(ctx, r) }

// Prepare is what the first tools/list waits for: the configured servers
// started, and the cloud's tools when they come quickly.
func (s Serving) Prepare(ctx context.Context) {
	s.b.LoadServers(ctx)
	s.b.cloud.Wait(ctx)
}

// Prestart starts the pooled containers a session's first call would
// start unasked, before it comes (sandbox.prestart); only: the one
// server a view fronts ("": every configured server).
func (s Serving) Prestart(only string) { s.b.Prestart(only) }

// Known reports whether a tool can be called: registered, or not
// registered yet but resolvable (a configured server's, a cloud tool, one
// a registry may provide). Anything else is the SDK's "unknown tool".
func (s Serving) Known(name string) bool {
	return s.b.srv.HasTool(name) || s.b.registry.Resolvable(name)
}

// AuditRefused records a tools/call the go-sdk refused before any layer
// ran (see Broker.auditRefused).
func (s Serving) AuditRefused(tool string, args json.RawMessage, reason string) {
	s.b.auditRefused(tool, args, reason)
}

// RefreshTrust applies a `pml trust` given since the policy was read.
func (s Serving) RefreshTrust() { s.b.ask.RefreshTrust() }

// ReloadIfChanged reloads .pml.json now when it or the trust records
// changed since the last reload (Broker.ReloadIfChanged).
func (s Serving) ReloadIfChanged() bool { return s.b.ReloadIfChanged() }

// CancelBase cancels every running call, which kills its container (the
// session is ending).
func (s Serving) CancelBase() { s.b.cancelBase() }

// PrepareCapability makes an added capability's tools callable (pml run).
func (s Serving) PrepareCapability(ctx context.Context, c tl.Capability) {
	s.b.caps.Prepare(ctx, c)
}

// Forwardable reports whether the stdio fast path may forward calls of
// the tool as bytes: a pooled server's tool, of a server given no
// network (a host its proxy refuses becomes an approval, which needs the
// result held back), spoken to on 2025-11-25 (a 2026-07-28 server's
// answer may be input_required, which pml answers itself round after
// round: internal/upstream/rounds.go). The permissions are the caller's
// to check.
func (s Serving) Forwardable(name string) bool {
	entry, ok := s.b.srv.Table.Get(name)
	if !ok {
		return false
	}
	if _, pooled := entry.Exec.(sbx.PooledExec); !pooled {
		return false
	}
	srv := s.b.srv.ServerOf(name)
	return srv != nil && srv.Cfg.Network.Empty() && srv.Cfg.Protocol == ""
}
