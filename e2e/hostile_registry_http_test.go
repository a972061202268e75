//go:build linux

package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRegistriesRefusePlainHTTPToAnotherMachine: what pml first fetches
// from a registry is pinned in the lockfile and trusted from then on, so
// a registry is https, or http to this machine only, as for cloud.url. A
// policy naming a plain-http registry elsewhere cannot be trusted (its
// error says why and what to use), nor can PML_REGISTRIES name one; a
// loopback http registry is fine.
func TestRegistriesRefusePlainHTTPToAnotherMachine(t *testing.T) {
	t.Parallel()
	const refused = "is plain http to another machine"
	for _, u := range []string{"http://registry.example.com", "http://10.0.0.1:3004"} {
		ws := newWorkspace(t, "")
		ws.writeUntrusted(".pml.json", `{"permissions": {"allow": ["x:*"]}, "registries": ["https://registry.example.org", "`+u+`"]}`)
		out, code := trustWith(t, ws, t.TempDir(), "--yes")
		out = logText(out)
		if code == 0 || !strings.Contains(out, `"registries[1]"`) || !strings.Contains(out, refused) || !strings.Contains(out, "use https://") {
			t.Errorf("pml trust --yes of a policy with registry %s: exit %d, want it refused as plain http\n%s", u, code, out)
		}
	}

	ws := newWorkspace(t, "")
	cmd := exec.Command(pmlBin, "doctor")
	cmd.Dir = ws.Dir
	cmd.Env = cliEnv("PML_WORKSPACE="+ws.Dir, "PML_REGISTRIES=http://registry.example.com")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "PML_REGISTRIES") || !strings.Contains(string(out), refused) {
		t.Errorf("pml doctor with PML_REGISTRIES=http://registry.example.com does not refuse it:\n%s", out)
	}

	ok := newWorkspace(t, "")
	ok.writeUntrusted(".pml.json", `{"registries": ["http://127.0.0.1:3004", "http://[::1]:3004", "http://localhost:3004", "https://registry.example.org"]}`)
	if out, code := trustWith(t, ok, t.TempDir(), "--yes"); code != 0 {
		t.Errorf("pml trust --yes of loopback http and https registries: exit %d\n%s", code, out)
	}
}
