package registry

import (
	"reflect"
	"strings"
	"testing"
)

// An entry's warnings.createsDotfiles is read as seed 004 writes it
// (camelCase), as seed 000 does (creates_dotfiles), and as true with no
// names; it reaches the server's definition, where its approvals read it.
func TestMetadataReadsCreatesDotfiles(t *testing.T) {
	f := mustFQDN(t, "pml.mcp.serena.server")
	for _, tc := range []struct {
		doc    string
		names  []string
		writes bool
	}{
		{`{"createsDotfiles": [".serena"]}`, []string{".serena"}, true},
		{`{"creates_dotfiles": [".serena", ".cache"]}`, []string{".serena", ".cache"}, true},
		{`{"creates_dotfiles": true}`, nil, true},
		{`{"createsDotfiles": false}`, nil, false},
		{`{}`, nil, false},
	} {
		m, err := ParseMetadata(f, []byte(`{"type": "stdio", "image": "node:20", "tools": ["serena:analyze"], "warnings": `+tc.doc+`}`))
		if err != nil {
			t.Fatalf("%s: %v", tc.doc, err)
		}
		names, writes, err := m.Dotfiles()
		if err != nil || writes != tc.writes || !reflect.DeepEqual(names, tc.names) {
			t.Errorf("%s: %v %v %v", tc.doc, names, writes, err)
		}
		srv, err := ServerConfig(&Entry{FQDN: "pml.mcp.serena.server", Type: TypeStdio, Meta: m})
		if err != nil {
			t.Fatalf("%s: %v", tc.doc, err)
		}
		if srv.WritesDotfiles != tc.writes || !reflect.DeepEqual(srv.Dotfiles, tc.names) {
			t.Errorf("%s: server definition %v %v", tc.doc, srv.Dotfiles, srv.WritesDotfiles)
		}
	}
	for _, bad := range []string{`{"createsDotfiles": ".serena"}`, `{"creates_dotfiles": [""]}`, `{"createsDotfiles": [1]}`} {
		if _, err := ParseMetadata(f, []byte(`{"type": "stdio", "image": "node:20", "warnings": `+bad+`}`)); err == nil || !strings.Contains(err.Error(), "createsDotfiles") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
