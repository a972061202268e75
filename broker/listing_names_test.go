package broker

import (
	"bytes"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/config"
)

// A tool name with a control or bidi character, from a server's
// tools/list, is not listed; the log names the server and the name
// quoted, never raw.
func TestToolNamesWithControlCharactersAreRefused(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	var logs bytes.Buffer
	f.b.srv.log = zerolog.New(&logs)
	srv := &server{cfg: config.Server{Name: "probe"}}
	f.b.srv.registerServerTools(srv, []*mcp.Tool{
		{Name: "lookup", Description: "fine"},
		{Name: "read\x1b[2K\rfile", Description: "erases a line"},
		{Name: "ev\u202eil", Description: "reordered"},
		nil,
	})
	if _, ok := f.b.srv.tools.Get("probe:lookup"); !ok {
		t.Error("the ordinary tool is not listed")
	}
	for _, name := range []string{"probe:read\x1b[2K\rfile", "probe:ev\u202eil"} {
		if _, ok := f.b.srv.tools.Get(name); ok {
			t.Errorf("%q is listed", name)
		}
	}
	out := logs.String()
	if !strings.Contains(out, `read\\x1b[2K\\rfile`) || !strings.Contains(out, `ev\\u202eil`) || !strings.Contains(out, `"server":"probe"`) {
		t.Errorf("the log does not name the server and the quoted names:\n%s", out)
	}
	if strings.Contains(out, "\u202e") {
		t.Errorf("the log holds a raw bidi override:\n%s", out)
	}
}
