package tools

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestAServersToolDefinitionPassesWhatItCarries(t *testing.T) {
	no := false
	in := &mcp.Tool{Name: "t", Title: "T", Description: "d", InputSchema: map[string]any{"type": "object"},
		OutputSchema: map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}},
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no},
		Meta:         mcp.Meta{"ui": map[string]any{"resourceUri": "ui://s/app.html"}, "pml/env_required": []any{"HOME"}},
		Icons:        []mcp.Icon{{Source: "https://example.com/i.png"}, {Source: "data:image/png;base64,AA=="}}}
	def := toolDef("s:t", in, "")
	if string(def.OutputSchema) != `{"properties":{"n":{"type":"integer"}},"type":"object"}` || def.Title != "T" || def.Annotations != in.Annotations ||
		def.Meta["ui"].(map[string]any)["resourceUri"] != "ui://s/app.html" || len(def.Meta) != 1 || len(def.Icons) != 2 {
		t.Errorf("toolDef: %+v", def)
	}
	listed := toolOf(def)
	if string(listed.OutputSchema) != string(def.OutputSchema) || listed.Meta == nil || len(listed.Icons) != 2 {
		t.Errorf("the table's listing drops them: %+v", listed)
	}
	if d := toolDef("s:u", &mcp.Tool{Name: "u"}, ""); d.OutputSchema != nil || d.Meta != nil || d.Icons != nil {
		t.Errorf("a tool without them: %+v", d)
	}
}

func TestAServersToolIconsAndMetaAreBounded(t *testing.T) {
	var icons []mcp.Icon
	for _, src := range []string{"file:///etc/passwd", "javascript:alert(1)", "JAVASCRIPT:x", "http://example.com/i.png", "data:text/html,<b>", "i.png", ""} {
		icons = append(icons, mcp.Icon{Source: src})
	}
	for range 20 {
		icons = append(icons, mcp.Icon{Source: "HTTPS://example.com/i.png"})
	}
	icons = append(icons, mcp.Icon{Source: "DATA:image/png;base64,AA=="})
	def := toolDef("s:t", &mcp.Tool{Name: "t", Icons: icons, Meta: mcp.Meta{"pad": strings.Repeat("x", maxToolMeta)}}, "")
	if len(def.Icons) != maxIcons || def.Meta != nil {
		t.Errorf("%d icons (want %d), _meta kept: %v", len(def.Icons), maxIcons, def.Meta != nil)
	}
	for _, ic := range def.Icons {
		if !strings.HasPrefix(ic.Source, "HTTPS://") {
			t.Errorf("icon %q passed", ic.Source)
		}
	}
	huge := []mcp.Icon{{Source: "data:image/png;base64," + strings.Repeat("A", maxToolIcons)}}
	if def := toolDef("s:t", &mcp.Tool{Name: "t", Icons: huge}, ""); def.Icons != nil {
		t.Error("icons over their bound passed")
	}
}
