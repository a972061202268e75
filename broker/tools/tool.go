package tools

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
}
