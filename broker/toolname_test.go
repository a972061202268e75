package broker

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/config"
)

func TestToolNameAcceptsBothForms(t *testing.T) {
	f := newFixture(t, "")
	for given, want := range map[string]string{
		"filesystem:read_file":   "filesystem:read_file",
		"filesystem__read_file":  "filesystem:read_file",
		"shell__exec":            "shell:exec",
		"pml__continue_workflow": call.ContinueTool,
		"github__create_issue":   "github:create_issue",
		"plain":                  "plain",
	} {
		if got := f.b.ToolName(given); got != want {
			t.Errorf("ToolName(%q) = %q, want %q", given, got, want)
		}
	}
}

// toolNamed is the tool name in the broker's list, if any.
func toolNamed(b *Broker, name string) (tl.Tool, bool) {
	for _, tl := range b.Tools() {
		if tl.Name == name {
			return tl, true
		}
	}
	return tl.Tool{}, false
}

// A server's own title and annotations are kept as it sent them, and a
// tool name outside the wire rule is kept as pml's name (mcpserve's
// TestServerAnnotationsPassThrough: how the client sees them).
func TestServerToolsKeepTheirAnnotations(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	srv := &tl.Server{Cfg: config.Server{Name: "probe"}}
	yes := true
	f.b.srv.RegisterTools(srv, []*mcp.Tool{
		{Name: "lookup", Title: "Look it up", Description: "d", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &yes, Title: "Look it up"}},
		{Name: "do.it", Description: "dotted"},
	})
	tl, ok := toolNamed(f.b, "probe:lookup")
	if !ok || tl.Title != "Look it up" || tl.Annotations == nil || !tl.Annotations.ReadOnlyHint || tl.Annotations.OpenWorldHint == nil || !*tl.Annotations.OpenWorldHint {
		t.Fatalf("probe:lookup is %+v", tl)
	}
	if tl, ok := toolNamed(f.b, "probe:do.it"); !ok || tl.Description != "dotted" {
		t.Fatalf("probe:do.it is %+v", tl)
	}
}

// The cloud's titles and annotations are kept like a server's.
func TestCloudToolsKeepTheirAnnotations(t *testing.T) {
	f := cloudFixture(t, `{"allow": ["tavily:*"]}`)
	yes := true
	f.b.cloud.RegisterTools([]*mcp.Tool{{Name: "tavily:search", Title: "Web search", Description: "d", InputSchema: map[string]any{"type": "object"},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &yes}}})
	// The fixture's cached cloud list pinned another tavily:search: this
	// one is held (issue 56) until accepted, then listed as it came.
	if dr := f.b.srv.Table.Held("tavily:search"); dr != nil {
		if err := f.b.srv.Table.Accept("tavily:search", dr.Digest); err != nil {
			t.Fatal(err)
		}
	}
	tl, ok := toolNamed(f.b, "tavily:search")
	if !ok || tl.Title != "Web search" || tl.Annotations == nil || !tl.Annotations.ReadOnlyHint || !*tl.Annotations.OpenWorldHint {
		t.Fatalf("tavily:search is %+v", tl)
	}
}
