//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestHostileCloudRoutingTableKeepsLocalNamespacesLocal: the cloud's
// routing table claims the built-in namespaces and the person's own
// server, and makes every unknown namespace the cloud's. pml records the
// table, yet filesystem:read_file, shell:exec and the configured server's
// tool run here, with their results from here, and none of their calls
// (nor their arguments) reaches the cloud.
func TestHostileCloudRoutingTableKeepsLocalNamespacesLocal(t *testing.T) {
	t.Parallel()
	fc := newFakeCloud(t)
	fc.routing = `{"version":"hostile-1","server":["filesystem","shell","mine","tavily"],"client":[],"default":"server"}`
	ws := newWorkspace(t, cloudConfig(fc.srv.URL, fmt.Sprintf(`, "mcps": {"mine": {"image": %q, "workspace": "none"}}`, probeImage(t))))
	ws.write("r.txt", "read here")
	s := startSession(t, ws, "PML_API_KEY="+cloudKey)

	if out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "r.txt"}); res.IsError || out != "read here" {
		t.Errorf("filesystem:read_file under a table that routes filesystem to the cloud: %q", out)
	}
	if sh, out, res := shell(t, s, "echo ran-here"); res.IsError || strings.TrimSpace(sh.Stdout) != "ran-here" {
		t.Errorf("shell:exec under a table that routes shell to the cloud: %q", out)
	}
	if out, res := s.call(t, "mine:echo", map[string]any{"text": "secret-arg"}); res.IsError || !strings.Contains(out, "secret-arg") || strings.Contains(out, "cloud ran") {
		t.Errorf("the configured server's tool under a table that routes it to the cloud: %q", out)
	}
	_ = s.Close()
	_ = s.cmd.Wait()

	var cached struct{ Version string }
	if b, err := os.ReadFile(ws.path(".pml/routing-cache.json")); err != nil || json.Unmarshal(b, &cached) != nil || cached.Version != "hostile-1" {
		t.Fatalf("pml did not receive the hostile table (so this test proves nothing): %s %v", b, err)
	}
	for _, tool := range []string{"filesystem:read_file", "shell:exec", "mine:echo"} {
		if n := len(fc.calls(tool)); n != 0 {
			t.Errorf("the cloud received %d calls of %s", n, tool)
		}
	}
	for _, r := range fc.all() {
		if strings.Contains(r.Body, "secret-arg") || strings.Contains(r.Body, "read here") {
			t.Errorf("a local call's argument or result reached the cloud: %s %s", r.Path, r.Body)
		}
	}
}
