package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/broker/workflow"
)

// TestSDKLogLinesArePMLLines: what the go-sdk logs (here its error for an
// invalid tool name at AddTool) is one pml log line with its level and
// marked as the SDK's, not a level-less line wrapping slog's text form
// ("time=… level=ERROR msg=…").
func TestSDKLogLinesArePMLLines(t *testing.T) {
	var b bytes.Buffer
	s := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ServerOptions{Logger: sdkLogger(zerolog.New(&b))})
	s.AddTool(&mcp.Tool{Name: "bad name!", InputSchema: json.RawMessage(`{"type": "object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(b.Bytes()), &line); err != nil {
		t.Fatalf("not one JSON line: %q", b.String())
	}
	msg, _ := line["message"].(string)
	if line["level"] != "error" || line["from"] != "mcp-sdk" || !strings.Contains(msg, "invalid tool name") || strings.Contains(msg, "level=") {
		t.Errorf("the SDK's line: %v", line)
	}
}

// TestElicitationSaysWhatANetworkChoiceDoes: the client's dialog for a
// network approval says that "always" adds the host to the network list
// and that continue runs the call again (the old text said "Always also
// adds it to permissions.allow" and "Continue runs it once").
func TestElicitationSaysWhatANetworkChoiceDoes(t *testing.T) {
	a := workflow.Approval{ApprovalType: broker.ApprovalNetwork, Tool: "shell:exec", Description: "shell:exec tried to connect to example.com:443.",
		Options: []string{"continue", "always", "abort"}, Context: map[string]any{"always_adds": "example.com:443 to sandbox.network.allow in .pml.json"}}
	msg := elicitParams(a, false).Message
	for _, w := range []string{"Always also adds example.com:443 to sandbox.network.allow in .pml.json", "runs the call again"} {
		if !strings.Contains(msg, w) {
			t.Errorf("the dialog lacks %q: %s", w, msg)
		}
	}
	if strings.Contains(msg, "permissions.allow") || strings.Contains(msg, "runs it once") {
		t.Errorf("the dialog says what a tool permission does: %s", msg)
	}
	a = workflow.Approval{ApprovalType: workflow.ApprovalToolPermission, Tool: "shell:exec", Description: "Allow pml to run shell:exec?", Options: []string{"continue", "always", "abort"}}
	if msg := elicitParams(a, false).Message; !strings.Contains(msg, "Always also adds it to permissions.allow in .pml.json") {
		t.Errorf("a tool permission's dialog: %s", msg)
	}
}
