package mcpserve

import (
	"encoding/json"
	"testing"
)

func TestAClientsMetaGoesToTheServerButWhatWasForPml(t *testing.T) {
	for key, want := range map[string]bool{
		"example.com/trace":                  true,
		"traceparent":                        true,
		"ui":                                 true,
		"progressToken":                      false,
		"io.modelcontextprotocol/clientInfo": false,
		"modelcontextprotocol.io/x":          false,
		"dev.mcp/x":                          false,
		"mcpish.example/x":                   true,
		"a/b/c":                              true,
	} {
		if got := forServer(key); got != want {
			t.Errorf("forServer(%q) = %v, want %v", key, got, want)
		}
	}
	in := map[string]any{"progressToken": "t", "k": "v"}
	out := clientMeta(in)
	if len(out) != 1 || out["k"] != "v" || len(in) != 2 {
		t.Errorf("clientMeta: %v (the client's map: %v)", out, in)
	}
	if clientMeta(map[string]any{"progressToken": 1}) != nil || clientMeta(nil) != nil {
		t.Error("nothing to send is nil")
	}
}

func TestTheFastPathSendsTheClientsMetaValuesAsWritten(t *testing.T) {
	got := clientMetaBytes(json.RawMessage(`{"progressToken":7,"big":12345678901234567891,"f":1.50,"io.modelcontextprotocol/x":{}}`))
	if string(got) != `{"big":12345678901234567891,"f":1.50}` {
		t.Errorf("got %s", got)
	}
	for _, in := range []string{``, `null`, `[]`, `"s"`, `{"progressToken":1}`, `{`} {
		if got := clientMetaBytes(json.RawMessage(in)); got != nil {
			t.Errorf("%q: got %s, want nothing", in, got)
		}
	}
	if m := decodedMeta(json.RawMessage(`{"a":1,"progressToken":2}`)); len(m) != 1 || m["a"] != float64(1) {
		t.Errorf("decodedMeta: %v", m)
	}
}

// BenchmarkClientMetaBytes is the fast path's cost of a client's _meta:
// a call with a progress token only, and one with a few keys of its own.
func BenchmarkClientMetaBytes(b *testing.B) {
	for name, meta := range map[string]string{
		"token-only": `{"progressToken":17}`,
		"with-keys":  `{"progressToken":17,"example.com/trace":"abc-123","nested":{"n":7,"list":["a",true]}}`,
	} {
		b.Run(name, func(b *testing.B) {
			raw := json.RawMessage(meta)
			b.ReportAllocs()
			for range b.N {
				clientMetaBytes(raw)
			}
		})
	}
}
