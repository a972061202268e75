package call

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestFitFrameKeepsResultsUnderTheLimit(t *testing.T) {
	small := ToMCP(Result{Text: "ok", Structured: map[string]any{"a": 1}})
	if small.StructuredContent == nil {
		t.Fatal("a small result lost its structured content")
	}
	big := strings.Repeat("x", 600)
	out := fitFrame(ToMCP(Result{Text: big, Structured: map[string]any{"stdout": big}}), 1000)
	if out.StructuredContent != nil || !strings.Contains(out.Content[0].(*mcp.TextContent).Text, "structured content omitted") {
		t.Fatalf("structured content kept: %+v", out)
	}
	// Control characters grow six-fold in JSON; multi-byte runes must not
	// be split.
	nasty := strings.Repeat("\x01é", 2000)
	out = fitFrame(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: nasty}}}, 4000)
	b, _ := json.Marshal(out)
	text := out.Content[0].(*mcp.TextContent).Text
	if len(b) > 4000 || !strings.HasSuffix(text, "message limit]") || !utf8.ValidString(text) {
		t.Fatalf("cut result: %d bytes, valid=%v, %q", len(b), utf8.ValidString(text), text[len(text)-60:])
	}
}
