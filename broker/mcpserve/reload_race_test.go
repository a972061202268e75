package mcpserve

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// watcherFirst is a Backend whose session watcher wins the race with a
// call: by the time the call's ReloadIfChanged has the reload's lock, the
// watcher has read and applied the edit, so there is nothing left to read
// and it reports false, although the tool is known now.
type watcherFirst struct {
	Backend
	f *fixture
}

func (w watcherFirst) ReloadIfChanged() bool {
	w.f.br.Reload(func(string) string { return "" })
	return false
}

// TestACallOfAToolTheWatcherJustAddedIsNotUnknown: a server saved into
// .pml.json, called while the watcher's reload of it is being applied.
// The call found the tool unknown, asked for a reload, was told there was
// nothing to read (the watcher had read it), and answered "unknown tool"
// (CI saw it once in TestACallRightAfterPmlTrustFindsTheTrustedServer).
// It looks again after every reload it asks for.
func TestACallOfAToolTheWatcherJustAddedIsNotUnknown(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["*"]}}`)
	cs := stdioClientOn(t, watcherFirst{f.b, f}, nil)
	// Denied, so that the call is answered without a container: what is
	// checked is that it reaches the broker at all.
	edit := `{"permissions": {"allow": ["*"], "deny": ["d:*"]}, "mcps": {"d": {"image": "pml-test/none:1", "workspace": "none"}}}`
	if err := os.WriteFile(filepath.Join(f.ws, ".pml.json"), []byte(edit), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "d__echo", Arguments: map[string]any{"text": "x"}})
	if err != nil {
		t.Fatalf("a tool of the server the watcher just added: %v", err)
	}
	if !res.IsError {
		t.Fatalf("a denied tool ran: %+v", res)
	}
	t.Logf("answered: %s", text(res))
}
