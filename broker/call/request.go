package call

import (
	"context"
	"encoding/json"

	"github.com/pml-dev/pml/broker/workflow"
)

// Request is one tool call as the MCP layer hands it over.
type Request struct {
	Tool string
	Args json.RawMessage
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
