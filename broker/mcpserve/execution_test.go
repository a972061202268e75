package mcpserve

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pml's tools/list answer puts each tool's execution in its object, and
// leaves the rest as the go-sdk wrote it.
func TestListWithExecutionEncodesEachToolsExecution(t *testing.T) {
	l := &listing{exec: map[string][]byte{"a": []byte(`{"taskSupport":"optional"}`)}}
	lr := &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: "a", InputSchema: map[string]any{"type": "object"}}, {Name: "b", InputSchema: map[string]any{"type": "object"}}}, NextCursor: "c1"}
	res := l.withExecution(lr)
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tools []map[string]json.RawMessage `json:"tools"`
		Next  string                       `json:"nextCursor"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Tools) != 2 || string(got.Tools[0]["execution"]) != `{"taskSupport":"optional"}` || got.Tools[1]["execution"] != nil || got.Next != "c1" {
		t.Errorf("%s", b)
	}
	if string(got.Tools[0]["name"]) != `"a"` || string(got.Tools[0]["inputSchema"]) != `{"type":"object"}` {
		t.Errorf("%s", b)
	}
	// No tool with an execution: the go-sdk's own result.
	if r := (&listing{exec: map[string][]byte{}}).withExecution(lr); r != mcp.Result(lr) {
		t.Errorf("%T", r)
	}
}
