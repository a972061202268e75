package sandbox

import (
	"reflect"
	"strings"
	"testing"
)

// An execute_locally answer's declared tools are read in both spellings,
// merged, each once; a pattern or a non-list is refused, so a declaration
// can never hide the code's undeclared calls from the audit.
func TestExecuteLocallyDeclaredOfPayload(t *testing.T) {
	got, err := declaredOfPayload(map[string]any{"code": "return 1",
		"tools_used":   []any{"filesystem:read_file", "tavily:search"},
		"client_tools": []any{"filesystem:read_file"},
		"toolsUsed":    []any{"json:parse"}})
	if want := []string{"filesystem:read_file", "tavily:search", "json:parse"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("declared %v (%v), want %v", got, err, want)
	}
	if got, err := declaredOfPayload(map[string]any{"code": "return 1"}); err != nil || got != nil {
		t.Errorf("nothing declared: %v %v", got, err)
	}
	for _, bad := range []map[string]any{
		{"tools_used": []any{"*"}},
		{"client_tools": []any{"filesystem:*"}},
		{"tools_used": "filesystem:read_file"},
		{"toolsUsed": []any{42}},
	} {
		if _, err := declaredOfPayload(bad); err == nil || !strings.Contains(err.Error(), "tool") {
			t.Errorf("%v: %v", bad, err)
		}
	}
}
