package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
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
