package call

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/broker/workflow"
)

// Result is the outcome of one call, independent of the MCP wire format.
type Result struct {
	// Text is the content a person (or model) reads.
	Text string
	// Structured is optional machine-readable output.
	Structured any
	// IsError marks a failed call: a tool error, a refusal, a timeout.
	IsError bool
	// Blocked: a path argument was refused (audited as path_blocked).
	Blocked bool
	// Upstream is a server tool's result as the server sent it (all its
	// content blocks), passed on unchanged.
	Upstream *mcp.CallToolResult
	// Raw is a server tool's result forwarded on the fast path
	// (broker/mcpserve/fastpath.go): the result member of its answer, as
	// it sent it.
	Raw json.RawMessage
	// Reply is the server's answer to a request of another Kind than a
	// tool call (*mcp.GetPromptResult, *mcp.ReadResourceResult,
	// *mcp.CompleteResult, or nil for a subscription), passed on
	// unchanged.
	Reply any
	// Cause is the failure behind an error result made by pml itself (not
	// a tool's own error), for callers that map kinds to exit codes.
	Cause error
	// Refusal, set by an executor that refused the call itself after a
	// deny pattern (pml:execute whose answer declares a denied tool), is
	// what the audit entry of the call records: denied, with the pattern.
	Refusal *Refusal
	// UpFront, set by pml:execute's executor, is the declaration of the
	// code the cloud sent when some of its declared tools ask: the run
	// waits for one approval of them (layer_execute.go opens it,
	// approve.UpFrontApproval).
	UpFront *Declared
	// Degraded says what the call ran without that it was given (network
	// on an engine that cannot reach pml's egress proxy): the audit entry
	// records it as its reason.
	Degraded string
}

// Refusal is why an executor refused a call by a deny pattern.
type Refusal struct {
	Pattern, Reason string
}

// Err returns the failure behind an error result pml made itself, to be
// tested with errors.Is against ErrDenied, ErrUnavailable, ErrCloud,
// ErrNotFound, ErrInvalidInput; nil for successes and tools' own errors.
func (r Result) Err() error { return r.Cause }

// Approval returns the approval a result asks for, if it asks.
func (r Result) Approval() (workflow.Approval, bool) {
	a, ok := r.Structured.(workflow.Approval)
	return a, ok && !r.IsError
}
