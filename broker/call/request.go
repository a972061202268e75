package call

import (
	"context"
	"encoding/json"

	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/upstream"
)

// Request is one tool call as the MCP layer hands it over.
type Request struct {
	// Tool is the tool's name; for a request of another Kind, the
	// permission name it is decided by (kind.go: SERVER:prompt:NAME,
	// SERVER:resource:URI).
	Tool string
	// Args are the tool's arguments; for another Kind, the request's
	// params as the client sent them (mcp.GetPromptParams, ...).
	Args json.RawMessage
	// Kind is what the request asks of a server: a tool call (zero), a
	// prompt, a resource read or subscription, a completion (kind.go).
	Kind Kind
	// Workflows holds the calling session's pending approvals.
	Workflows *workflow.Workflows
	// Ask, when set, asks the human right away (MCP elicitation). It
	// returns "continue", "always" or "abort", or what else the person did
	// there ("declined", "cancelled", "not answered"), which is final; shown
	// is false when the question never reached the person (the client
	// failed the request): then the call returns approval_required.
	Ask func(ctx context.Context, a workflow.Approval) (choice string, shown bool)
	// Dialog: the client answers approvals in its own dialog through input
	// requests (multi round-trip); every approval result becomes one.
	Dialog bool
	// Elicited, when set, is a person's answer to a workflow of this tool,
	// given through the client's elicitation UI; Args are then ignored.
	Elicited *Elicited

	// Relay is where a server's progress, log messages and requests go
	// during the call (the client's session); ProgressToken is the
	// client's progress token. Set by the MCP surface; a server's
	// executor reads them.
	Relay         upstream.Relay
	ProgressToken any
	// Meta is the client's _meta for the server: what the client sent
	// but the progress token and the keys meant for pml alone
	// (mcpserve/meta.go takes them out). A server's executor sends it on;
	// no layer reads it.
	Meta map[string]any
	// Forward, when set, asks a pooled server's executor to forward the
	// call as bytes (mcpserve/fastpath.go).
	Forward *ForwardCall
	// Run is the declaration of the code run that makes this call (one
	// of its inner calls): nil for any other call, or a run that
	// declared nothing. Its declared calls a person approved before the
	// run do not ask again; the others are flagged in the audit.
	Run *Declared
}

// Within is r made again within the call of outer (a call re-entered
// below the audit, an integrity approval's run): it carries outer's
// relay, progress token, _meta, forward and run, as outer's context did.
func (r Request) Within(outer Request) Request {
	r.Relay, r.ProgressToken, r.Meta, r.Forward, r.Run = outer.Relay, outer.ProgressToken, outer.Meta, outer.Forward, outer.Run
	return r
}

// Elicited is an answer from the client's elicitation UI.
type Elicited struct {
	WorkflowID string
	// Choice is "continue", "always" or "abort"; else what the person did
	// instead ("declined", "cancelled", "not answered"), which ends the
	// workflow.
	Choice string
}

// ContinueTool is the tool clients that cannot resend a call use to answer
// an approval.
const ContinueTool = "pml:continue_workflow"
