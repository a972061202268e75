package pathguard

import "testing"

func TestProtectedIgnoresCase(t *testing.T) {
	ws := "/w"
	for _, p := range []string{"/w/.pml.json", "/w/.PML.JSON", "/w/.Pml/audit.jsonl", "/w/.MCP.json", "/w/.ENV", "/w/.env", "/w/.pml.json.", "/w/.env "} {
		if _, ok := Protected(ws, p); !ok {
			t.Errorf("%s is not protected", p)
		}
	}
	for _, p := range []string{"/w", "/w/src/.pml.json", "/w/.pml.json.new", "/w/.envrc", "/other/.pml.json", "/w/notes"} {
		if n, ok := Protected(ws, p); ok {
			t.Errorf("%s is protected as %s", p, n)
		}
	}
}
