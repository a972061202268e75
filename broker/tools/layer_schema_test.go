package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckArgsNamesUnknownAndMissingKeys(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"head":{"type":"integer"}},"required":["path"]}`)
	for _, tc := range []struct {
		name string
		args map[string]any
		want []string // substrings of the error; nil: no error
	}{
		{"the right arguments pass", map[string]any{"path": "x"}, nil},
		{"a misspelt key is named with the missing one", map[string]any{"paht": "x"}, []string{`unknown argument "paht"`, `missing required argument "path"`}},
		{"no arguments name the missing key", nil, []string{`missing required argument "path"`}},
		{"a wrong type says what the validator found", map[string]any{"path": 3}, []string{"path"}},
		{"an extra key the schema does not forbid passes", map[string]any{"path": "x", "other": 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkArgs(schema, tc.args)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCheckArgsLetsAnUnreadableSchemaPass(t *testing.T) {
	if err := checkArgs(json.RawMessage(`{"type": 7}`), map[string]any{"a": 1}); err != nil {
		t.Errorf("a schema pml cannot read refused the call: %v", err)
	}
}
