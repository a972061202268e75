package call

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToMCP is a call's Result as an MCP tool result: a server's own result
// passed on (decoded first when it came as bytes on the fast path), or
// pml's text and structured content; cut to fit one frame either way.
func ToMCP(r Result) *mcp.CallToolResult {
	if r.Raw != nil && r.Upstream == nil {
		// A forwarded result taking the slow way (too large to pass on
		// whole): decoded once, to be cut to fit.
		var up mcp.CallToolResult
		if err := json.Unmarshal(r.Raw, &up); err != nil {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the MCP server's result is malformed: " + err.Error()}}, IsError: true}
		}
		r.Upstream = &up
	}
	if r.Upstream != nil {
		up := *r.Upstream
		return fitFrame(&mcp.CallToolResult{Meta: up.Meta, Content: up.Content, StructuredContent: up.StructuredContent, IsError: up.IsError}, MaxResultBytes)
	}
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Text}}, IsError: r.IsError}
	if r.Structured != nil {
		out.StructuredContent = r.Structured
	}
	return fitFrame(out, MaxResultBytes)
}

// MaxResultBytes bounds one tool result on the wire. MCP clients refuse
// frames above 16 MiB (the go-sdk's default, and pml's own inbound
// limit), which would fail the whole call; a result is cut to fit instead.
const MaxResultBytes = 15 << 20

// fitFrame makes out encode to at most max bytes. Structured content
// repeats what the text says, so it goes first; then the text is cut,
// with a note, at a UTF-8 boundary.
func fitFrame(out *mcp.CallToolResult, max int) *mcp.CallToolResult {
	size := func() int {
		b, err := json.Marshal(out)
		if err != nil {
			return 0
		}
		return len(b)
	}
	n := size()
	if n <= max {
		return out
	}
	tc, _ := out.Content[0].(*mcp.TextContent)
	if out.StructuredContent != nil {
		out.StructuredContent = nil
		if tc != nil {
			tc.Text += fmt.Sprintf("\n[structured content omitted: the result is larger than %d MiB]", max>>20)
		}
		if n = size(); n <= max {
			return out
		}
	}
	if tc == nil {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the result is too large to send"}}, IsError: true}
	}
	note := fmt.Sprintf("\n[result cut to fit the %d MiB message limit]", max>>20)
	for n > max {
		keep := int(float64(len(tc.Text)) * float64(max-1024) / float64(n))
		for keep > 0 && !utf8.RuneStart(tc.Text[keep]) {
			keep--
		}
		tc.Text = tc.Text[:keep] + note
		n = size()
	}
	return out
}
