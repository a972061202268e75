package tools

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/toolbox"
)

// Tool is what the client sees in tools/list.
type Tool struct {
	Name        string
	Description string
	InputSchema json.RawMessage
	// Title and Annotations are shown to clients as they are (a server's
	// own pass through).
	Title       string
	Annotations *mcp.ToolAnnotations
	// OutputSchema, Meta and Icons are a server's own, shown to clients
	// as it listed them (toolbox.Tool's); pml decides nothing by them.
	OutputSchema json.RawMessage
	Meta         mcp.Meta
	Icons        []mcp.Icon
	// Execution is the server's `execution` object as it wrote it
	// (toolbox.Tool's), for the client alone.
	Execution json.RawMessage
}

// Listed is a tool as a client sees it: its wire name and pml's
// (broker's ListedTools, for pml tools).
type Listed struct {
	Tool
	Wire string
}

// Continue is pml:continue_workflow as tools/list shows it: the answer to
// an approval for a client that cannot resend the original call (broker's
// input layer takes it to the approver). It ends every listing.
var Continue = Tool{
	Name: call.ContinueTool,
	Description: "Answer a pending approval (a result with approval_required) for clients that cannot resend the original call: " +
		"approved runs the stored call, always also adds the tool to permissions.allow in .pml.json.",
	InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "workflow_id": {"type": "string", "description": "The workflow_id of the approval_required result."},
    "approved": {"type": "boolean", "description": "true runs the call, false aborts it."},
    "always": {"type": "boolean", "description": "Also allow this tool from now on (saved in .pml.json)."}
  },
  "required": ["workflow_id", "approved"]
}`),
	Title: "Continue workflow",
	// It runs the stored call, which may write.
	Annotations: toolbox.Hints("Continue workflow", false, true, false),
}
