//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestAnUntrustedCheckoutsServerOrCapabilityAsksForTrust: in a CI
// checkout nobody trusted, `pml call` of a tool of a server the
// committed .pml.json defines, or of a capability it names, exits 3
// ("approval_required") and says to run `pml trust`, as docs/ci.md
// promises; before, it exited 2 "no such tool". Nothing runs and no
// registry is asked. A tool no grant would offer is still "no such tool"
// (exit 2), and after `pml trust --yes` the server's tool runs.
func TestAnUntrustedCheckoutsServerOrCapabilityAsksForTrust(t *testing.T) {
	t.Parallel()
	needImage(t, memoryImage)
	dir := t.TempDir()
	writeEntry(t, dir, "acme.tools.mathx.double.ts", noteCapability)
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, "")
	ws.writeUntrusted(".pml.json", fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "registries": [%q],
  "mcps": {"memory": {"image": %q, "workspace": "none"}},
  "capabilities": ["acme.tools.mathx.double"]}`, reg.URL, memoryImage))

	for _, tool := range []string{"memory:read_graph", "mathx:double"} {
		code, stdout, stderr := runPML(t, ws, "call", tool, `{}`)
		var out struct {
			Outcome string `json:"outcome"`
		}
		_ = json.Unmarshal([]byte(strings.TrimSpace(stdout)), &out)
		if code != 3 || out.Outcome != "approval_required" || !strings.Contains(stderr, "pml trust") || !strings.Contains(stderr, "not trusted") {
			t.Errorf("pml call %s in an untrusted checkout: exit %d, outcome %q, want 3 and approval_required naming pml trust\nstdout: %s\nstderr: %s", tool, code, out.Outcome, stdout, stderr)
		}
	}
	if n := strings.Count(reg.stderr.String(), "mathx"); n != 0 {
		t.Errorf("the registry was asked %d times for an untrusted capability", n)
	}
	if code, stdout, _ := runPML(t, ws, "call", "nosuch:tool", `{}`); code != 2 || !strings.Contains(stdout, "usage_error") {
		t.Errorf("a tool no grant offers: exit %d, %s; want 2 (no such tool)", code, stdout)
	}
	assertNoContainers(t, ws.Dir)

	ws.trust()
	if code, stdout, stderr := runPML(t, ws, "call", "memory:read_graph", `{}`); code != 0 {
		t.Errorf("after pml trust --yes: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
