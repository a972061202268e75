package upstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The `execution` of the tools a server lists is kept from the answer to
// pml's tools/list and carried in the tool's _meta under pml's key; a
// key the server wrote there is dropped; an answer to another request,
// or one over the bound, records nothing.
func TestExecutionsAreReadFromTheToolsListAnswer(t *testing.T) {
	var e executions
	id, _ := jsonrpc.MakeID(float64(7))
	other, _ := jsonrpc.MakeID(float64(8))
	e.sent(&jsonrpc.Request{ID: id, Method: "tools/list"})
	e.read(&jsonrpc.Response{ID: other, Result: json.RawMessage(`{"tools":[{"name":"a","execution":{"taskSupport":"forged"}}]}`)})
	big := `{"pad":"` + strings.Repeat("x", maxRecordedExecution) + `"}`
	e.read(&jsonrpc.Response{ID: id, Result: json.RawMessage(`{"tools":[{"name":"a","execution":{"taskSupport":"optional"}},{"name":"b"},{"name":"c","execution":` + big + `}]}`)})
	// A second answer with the same id is not one pml waits for.
	e.read(&jsonrpc.Response{ID: id, Result: json.RawMessage(`{"tools":[{"name":"b","execution":{"taskSupport":"required"}}]}`)})
	tools := []*mcp.Tool{{Name: "a"}, {Name: "b", Meta: mcp.Meta{ExecutionKey: "forged", "k": "v"}}, {Name: "c"}}
	orig := tools[1]
	e.withExecution(tools)
	if got, _ := json.Marshal(tools[0].Meta[ExecutionKey]); string(got) != `{"taskSupport":"optional"}` {
		t.Errorf("a: %s", got)
	}
	if _, ok := tools[1].Meta[ExecutionKey]; ok || tools[1].Meta["k"] != "v" {
		t.Errorf("b: %v", tools[1].Meta)
	}
	if orig.Meta[ExecutionKey] != "forged" {
		t.Error("the go-sdk's tool was written to")
	}
	if tools[2].Meta != nil {
		t.Errorf("c (over the bound): %v", tools[2].Meta)
	}
}
