//go:build linux

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestACallRightAfterPmlTrustFindsTheTrustedServer: a running session;
// the person adds a server to .pml.json, runs `pml trust` and calls the
// new server's tool at once, as a script does. The call came before the
// session's watcher had reloaded the file (150 ms after the save): the
// content the session had was trusted, so nothing reloaded it, and the
// call got "unknown tool". Now a call of a tool pml does not know reads
// .pml.json and the trust records again when either changed since they
// were applied, and runs. Three servers in turn, each called within
// milliseconds of its `pml trust`.
func TestACallRightAfterPmlTrustFindsTheTrustedServer(t *testing.T) {
	image := probeImage(t)
	servers := []string{fmt.Sprintf(`"a": {"image": %q, "workspace": "none"}`, image)}
	config := func() string {
		return fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {%s}}`, strings.Join(servers, ", "))
	}
	ws := newWorkspace(t, config())
	s := startSession(t, ws)
	if out, res := s.call(t, "a:echo", map[string]any{"text": "a"}); res.IsError || out != "a" {
		t.Fatalf("a:echo before any edit: %q (error %v)", out, res.IsError)
	}
	for _, name := range []string{"b", "c", "d"} {
		servers = append(servers, fmt.Sprintf(`%q: {"image": %q, "workspace": "none"}`, name, image))
		// Saved as editors save (a new file renamed over the old one),
		// then trusted, then called: no wait for the session's reload.
		tmp := ws.writeUntrusted(".pml.json.tmp", config())
		if err := os.Rename(tmp, ws.path(".pml.json")); err != nil {
			t.Fatal(err)
		}
		ws.trust()
		tool := name + ":echo"
		if out, res := s.call(t, tool, map[string]any{"text": name}); res.IsError || out != name {
			t.Fatalf("%s right after pml trust: %q (error %v)\nstderr:\n%s", tool, out, res.IsError, tail(s.stderr.String()))
		}
	}
}
