//go:build linux

package e2e

import (
	"strings"
	"testing"
)

// TestANetworkFailureInAToolSaysItIsIsolatedOnPurpose: a command in
// shell:exec that tries the network fails (no network: no packet
// leaves), and its result says that this is pml's rule and how to allow
// a host, not only busybox's "bad address"; a command that fails for
// another reason gets no such note.
func TestANetworkFailureInAToolSaysItIsIsolatedOnPurpose(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}}`)
	s := startSession(t, ws)
	_, out, res := shell(t, s, `wget -q -O- http://pml-test.invalid/ 2>&1; exit 1`)
	if !res.IsError || !strings.Contains(out, "no network on purpose") || !strings.Contains(out, "sandbox.network.allow") || !strings.Contains(out, "pml trust") {
		t.Errorf("a network failure in shell:exec: isError=%v\n%s", res.IsError, out)
	}
	if _, out, _ := shell(t, s, `echo plain failure >&2; exit 3`); strings.Contains(out, "no network on purpose") {
		t.Errorf("a failure that is not the network got the note:\n%s", out)
	}
}
