//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHostileServerToolDefinitionsAreBoundedAndInert (issue 53): a
// server's tool definitions pass to the client as data and grant
// nothing. A title of terminal escapes reaches the client as written
// (the client shows it) and pml tools shows it quoted; icons keep only
// https: and data:image sources, at most 16 (file:, javascript:, http:
// and data:text/html are dropped); a _meta of 1 MiB is dropped (the tool
// is listed without it); a _meta naming "pml", "progressToken" or an MCP
// key is passed as data and allows nothing: the tool still asks; its
// pml/ keys (pml's own namespace) are dropped. pml's approval of a tool
// with an output schema comes as an error result with its text alone:
// it is not the tool's output, which a client checks against the schema.
func TestHostileServerToolDefinitionsAreBoundedAndInert(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, fmt.Sprintf(`{"mcps": {"evil": {"image": %q, "workspace": "none", "env": {"PROBE_HOSTILE_DEFS": "1"}}},
  "permissions": {"allow": ["evil:bigmeta"]}}`, probeImage(t)))
	code, stdout, stderr := runPML(t, ws, "tools", "evil")
	if code != 0 {
		t.Fatalf("pml tools evil: exit %d\n%s", code, stderr)
	}
	for _, r := range rawControls {
		if strings.Contains(stdout, r) || strings.Contains(stderr, r) {
			t.Errorf("pml tools prints %q raw:\n%q", r, stdout)
		}
	}
	if !strings.Contains(stdout, `\x1b]0;pwned`) || strings.Contains(stdout, "second line") {
		t.Errorf("pml tools does not show the title quoted, first line only:\n%s", stdout)
	}
	url, token := startServe(t, ws)
	for via, cs := range map[string]*mcp.ClientSession{"stdio": startSession(t, ws).ClientSession, "serve": httpSession(t, url, token)} {
		t.Run(via, func(t *testing.T) {
			dec := listedTool(t, cs, "evil:decorated")
			if !strings.HasPrefix(dec.Title, "\x1b]0;pwned\x07") {
				t.Errorf("the title did not reach the client as the server wrote it: %q", dec.Title)
			}
			if len(dec.Icons) != 16 {
				t.Errorf("%d icons, want the 16 first https ones", len(dec.Icons))
			}
			for _, ic := range dec.Icons {
				if !strings.HasPrefix(ic.Source, "https://") {
					t.Errorf("icon %q reached the client", ic.Source)
				}
			}
			if dec.Meta["pml"] == nil || dec.Meta["progressToken"] != "forged" {
				t.Errorf("a tool's _meta is not passed as data: %v", dec.Meta)
			}
			if _, ok := dec.Meta["pml/env_required"]; ok {
				t.Errorf("a pml/ key of a tool's _meta reached the client: %v", dec.Meta)
			}
			big := listedTool(t, cs, "evil:bigmeta")
			if big.Meta != nil {
				t.Errorf("a _meta of 1 MiB reached the client (%d keys)", len(big.Meta))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: big.Name, Arguments: map[string]any{}})
			if err != nil || res.IsError || text(res) != "ran bigmeta" {
				t.Errorf("bigmeta: %v %q", err, text(res))
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: dec.Name, Arguments: map[string]any{}})
			if err != nil || strings.Contains(text(res), "ran decorated") || !strings.Contains(text(res), "approv") {
				t.Errorf("decorated ran without a person's approval: %v %q", err, text(res))
			}
			// pml's approval is not the output of a tool with an output
			// schema, which a client checks the structured content of a
			// result that is not an error against: it comes as an error
			// with its text alone (mcpserve/wirename.go, fitSchema).
			typed := listedTool(t, cs, "evil:typed")
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: typed.Name, Arguments: map[string]any{"w": 1, "h": 2}})
			if err != nil || !res.IsError || res.StructuredContent != nil || !strings.Contains(text(res), "workflow_id") {
				t.Errorf("typed's approval: %v isError=%v structured=%v %q", err, res != nil && res.IsError, res != nil && res.StructuredContent != nil, text(res))
			}
		})
	}
}
