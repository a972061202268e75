package upstream

import (
	"encoding/json"
	"testing"
)

func TestAForwardedCallsMetaHoldsTheCallersMembersAndPmlsToken(t *testing.T) {
	for _, c := range []struct{ meta, tok, want string }{
		{``, ``, ``},
		{``, `"pml-p-1"`, `,"_meta":{"progressToken":"pml-p-1"}`},
		{`{"a":1}`, ``, `,"_meta":{"a":1}`},
		{` {"a":1,"b":{"c":[2]}} `, `"pml-p-2"`, `,"_meta":{"a":1,"b":{"c":[2]},"progressToken":"pml-p-2"}`},
		{`{}`, ``, ``},
		{`[1]`, `"t"`, `,"_meta":{"progressToken":"t"}`},
		{`{"a":`, ``, ``},
		{`{"a":1}{"b":2}`, ``, ``},
	} {
		got := string(appendMeta(nil, []byte(c.meta), c.tok))
		if got != c.want {
			t.Errorf("appendMeta(%q, %q) = %q, want %q", c.meta, c.tok, got, c.want)
		}
		if got != "" && !json.Valid([]byte("{"+got[1:]+"}")) {
			t.Errorf("%q is not a JSON member", got)
		}
	}
}

func TestCallMetaIsACopy(t *testing.T) {
	in := map[string]any{"k": "v"}
	out := callMeta(in)
	out["progressToken"] = "pml-1"
	if len(in) != 1 || callMeta(nil) != nil || callMeta(map[string]any{}) != nil {
		t.Errorf("callMeta changed the caller's map or made an empty one: %v", in)
	}
}
