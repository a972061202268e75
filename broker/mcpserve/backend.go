package mcpserve

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
)

// Backend is what the MCP surface reads of a broker: every member is
// used by stdio, Streamable HTTP, the fast path or the roots, and
// nothing else of the broker is. broker.Serving implements it (got from
// Broker.Serving); tests may wrap one. A Backend must be comparable,
// and equal to another only when both serve the same broker: the listing
// compares the one it follows with the one served (roots.go swaps it).
type Backend interface {
	// Workspace is the workspace directory; WorkspaceExplicit says the
	// person named it (PML_WORKSPACE), so the client's roots neither move
	// it nor are compared with it.
	Workspace() string
	WorkspaceExplicit() bool
	// Log is pml's log (stderr).
	Log() *zerolog.Logger
	// ApprovalTimeout is a pending approval's lifetime (hil.timeout): a
	// session's workflows expire after it, a dialog waits part of it.
	ApprovalTimeout() time.Duration

	// Tools is every tool known now; OnToolsChanged tells f when tools
	// appear, change or go, or the permissions deciding the list changed.
	Tools() []tl.Tool
	OnToolsChanged(f func(added []tl.Tool, removed []string))
	// Decide is what the permissions in force say of a tool (a denied
	// one is not listed; the fast path takes only allowed ones).
	Decide(name string) call.Decision
	// Known: a tool not listed can still be called (registered but
	// hidden, or resolvable: a configured server's, a cloud or registry
	// tool); else the SDK's "unknown tool" answers.
	Known(name string) bool
	// Forwardable: the fast path may forward the tool's calls as bytes
	// (a pooled server's, given no network).
	Forwardable(name string) bool

	// Call runs a call down the request path (which audits it);
	// AuditRefused records a call the go-sdk refused before any layer ran.
	Call(ctx context.Context, r call.Request) call.Result
	AuditRefused(tool string, args json.RawMessage, reason string)

	// Prepare is what the first tools/list waits for (the configured
	// servers started, the cloud's tools when they come quickly);
	// PrepareCapability makes an added capability's tools callable (pml
	// run).
	Prepare(ctx context.Context)
	// Prestart starts, in the background, the pooled container of each
	// configured server (only: that one) whose calls need no question,
	// so that the session's first call finds it running
	// (sandbox.prestart); it never asks, installs or waits.
	Prestart(only string)
	PrepareCapability(ctx context.Context, c tl.Capability)
	// RefreshTrust applies a `pml trust` given since the policy was read.
	RefreshTrust()
	// ReloadIfChanged reads .pml.json again at once when it or the trust
	// records changed since they were last read (before the watcher
	// does), and reports whether it did.
	ReloadIfChanged() bool
	// CancelBase cancels every running call, killing its container (the
	// session ends).
	CancelBase()

	// ServesFeatures: a configured server could serve prompts,
	// resources or completions (features.go declares them only then);
	// Offers lists them, server by server (a prompts/get, resources/read,
	// subscription or completion goes through Call, with its Kind).
	ServesFeatures() bool
	Offers(ctx context.Context) []tl.ServerOffer
	// OnServerNotice tells f of a server's resources/updated and its
	// resources and prompts list_changed.
	OnServerNotice(f func(server, method string, params any))
}

// The broker's adapter is a Backend.
var _ Backend = broker.Serving{}
