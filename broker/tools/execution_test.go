package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/upstream"
)

// A tool's execution passes as the server wrote it when it is a JSON
// object within the bound; anything else is dropped; the key never
// reaches the client's _meta.
func TestToolExecutionIsAnObjectWithinItsBound(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{json.RawMessage(`{"taskSupport":"optional"}`), `{"taskSupport":"optional"}`},
		{map[string]any{"taskSupport": "required"}, `{"taskSupport":"required"}`},
		{"HOSTILE", ""},
		{[]any{1, 2}, ""},
		{nil, ""},
		{json.RawMessage(`{"pad":"` + strings.Repeat("x", maxToolExecution) + `"}`), ""},
	} {
		tool := &mcp.Tool{Name: "t", Meta: mcp.Meta{upstream.ExecutionKey: c.v}}
		def := toolDef("s:t", tool, "")
		if string(def.Execution) != c.want {
			t.Errorf("%v: execution %s, want %q", c.v, def.Execution, c.want)
		}
		if _, ok := def.Meta[upstream.ExecutionKey]; ok {
			t.Errorf("%v: the key reached the _meta", c.v)
		}
	}
}
