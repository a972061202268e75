//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The App the probe's tool "typed" announces (e2e/testservers/probe/defs.go).
const probeAppURI = "ui://probe/app.html"

// defsSessions are the client sessions the tests of tool definitions run
// over: `pml stdio` on ws (its calls to a pooled server take the fast
// path), `pml stdio` on a workspace where the probe is given network (the
// go-sdk's path: such a server's calls are never forwarded as bytes,
// mcpserve/fastpath.go) and `pml serve` on ws (the go-sdk's path).
func defsSessions(t *testing.T, ws *workspace) map[string]*mcp.ClientSession {
	t.Helper()
	url, token := startServe(t, ws)
	networked := newWorkspace(t, probeConfig(t, `, "network": {"allow": ["example.com"]}`))
	return map[string]*mcp.ClientSession{
		"stdio":      startSession(t, ws).ClientSession,
		"stdio-slow": startSession(t, networked).ClientSession,
		"serve":      httpSession(t, url, token),
	}
}

// listedTool is the tool a session lists as pml's name.
func listedTool(t *testing.T, cs *mcp.ClientSession, name string) *mcp.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		if pmlName(tool.Name) == name {
			return tool
		}
	}
	t.Fatalf("%s is not listed", name)
	return nil
}

// TestToolDefinitionsPassThroughWithOutputSchemaAndApp (issue 53): the
// probe's tool "typed", whose output schema the go-sdk made from its Go
// type (and checks its structured content against), is listed by pml
// over stdio and serve with everything the server wrote: output schema,
// title, annotations, icons, and the _meta announcing its MCP App
// (ui.resourceUri and the older ui/resourceUri, a ui:// URI) unchanged;
// a call answers structured content that fits the schema, on the fast
// path and on the go-sdk's.
func TestToolDefinitionsPassThroughWithOutputSchemaAndApp(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, probeConfig(t, ""))
	for via, cs := range defsSessions(t, ws) {
		t.Run(via, func(t *testing.T) {
			tool := listedTool(t, cs, "probe:typed")
			schema, _ := json.Marshal(tool.OutputSchema)
			if tool.OutputSchema == nil || !strings.Contains(string(schema), `"area"`) || !strings.Contains(string(schema), `"label"`) {
				t.Errorf("outputSchema not passed: %s", schema)
			}
			if tool.Title != "Area of a rectangle" {
				t.Errorf("title %q", tool.Title)
			}
			if a := tool.Annotations; a == nil || a.Title != "Area" || !a.ReadOnlyHint || !a.IdempotentHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
				t.Errorf("annotations %+v", a)
			}
			if len(tool.Icons) != 2 || tool.Icons[0].Source != "https://example.com/area.png" || tool.Icons[0].Sizes[0] != "48x48" ||
				!strings.HasPrefix(tool.Icons[1].Source, "data:image/svg+xml") || tool.Icons[1].Theme != mcp.IconThemeDark {
				t.Errorf("icons %+v", tool.Icons)
			}
			ui, _ := tool.Meta["ui"].(map[string]any)
			if ui["resourceUri"] != probeAppURI || tool.Meta["ui/resourceUri"] != probeAppURI || tool.Meta["example.com/probe"] != "kept" {
				t.Errorf("_meta %v", tool.Meta)
			}
			if v, _ := ui["visibility"].([]any); len(v) != 2 {
				t.Errorf("_meta.ui.visibility %v", ui["visibility"])
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.Name, Arguments: map[string]any{"w": 3, "h": 4}})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(res.StructuredContent)
			if res.IsError || string(got) != `{"area":12,"label":"3x4"}` {
				t.Errorf("typed: isError=%v structured %s text %q", res.IsError, got, text(res))
			}
		})
	}
}

// TestRequestMetaReachesTheServerAndResultMetaTheClient (issue 53): a
// client's tools/call _meta reaches the server unchanged but for what was
// for pml (its progress token, which pml replaces by its own, and MCP's
// reserved keys), and the server's result _meta reaches the client; over
// stdio's fast path, stdio's go-sdk path and serve.
func TestRequestMetaReachesTheServerAndResultMetaTheClient(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, probeConfig(t, ""))
	for via, cs := range defsSessions(t, ws) {
		t.Run(via, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			meta := mcp.Meta{
				"example.com/trace":                  "abc-123",
				"nested":                             map[string]any{"n": 7, "list": []any{"a", true}},
				"io.modelcontextprotocol/clientInfo": map[string]any{"name": "for pml only"},
				"progressToken":                      "client-token-1",
			}
			// Listed first: a call before the server's tools are
			// registered takes the go-sdk's path (mcpserve/fastpath.go).
			name := listedTool(t, cs, "probe:meta_echo").Name
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}, Meta: meta})
			if err != nil {
				t.Fatal(err)
			}
			var echo struct {
				Meta map[string]any `json:"meta"`
			}
			b, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, &echo); err != nil || res.IsError {
				t.Fatalf("meta_echo: isError=%v %s %q", res.IsError, b, text(res))
			}
			got := echo.Meta
			nested, _ := got["nested"].(map[string]any)
			if got["example.com/trace"] != "abc-123" || nested["n"] != float64(7) || fmt.Sprint(nested["list"]) != "[a true]" {
				t.Errorf("the server got _meta %v", got)
			}
			if _, leaked := got["io.modelcontextprotocol/clientInfo"]; leaked {
				t.Errorf("a reserved key reached the server: %v", got)
			}
			// pml's own token says which path the call took: pml-p-N is the
			// fast path's (internal/upstream/forward.go), pml-N the go-sdk's.
			tok := fmt.Sprint(got["progressToken"])
			if fast := strings.HasPrefix(tok, "pml-p-"); tok == "client-token-1" || !strings.HasPrefix(tok, "pml-") || fast != (via == "stdio") {
				t.Errorf("the server got the progress token %q, want one of pml's own (fast path: %v)", tok, via == "stdio")
			}
			ui, _ := res.Meta["ui"].(map[string]any)
			if res.Meta["example.com/result"] != "from the server" || ui["resourceUri"] != probeAppURI {
				t.Errorf("the result's _meta: %v", res.Meta)
			}
		})
	}
}
