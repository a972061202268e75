package cicheck

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// plan runs .ci/release.sh --plan (its decisions and the GoReleaser command,
// nothing run) with only the environment given, besides PATH and HOME.
func plan(t *testing.T, env ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command("bash", "../../.ci/release.sh", "--snapshot", "--plan")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestASnapshotWithoutOIDCSkipsSigningAndSaysSo: make release on a machine
// (make test-release) has no GitHub OIDC token to sign with: GoReleaser is
// told to skip signing, and a notice says so (in a workflow, as a GitHub
// notice too).
func TestASnapshotWithoutOIDCSkipsSigningAndSaysSo(t *testing.T) {
	out, errOut, code := plan(t)
	if code != 0 || !strings.Contains(out, "go tool -modfile=tools/goreleaser/go.mod goreleaser release --clean --snapshot --skip=sign") {
		t.Fatalf("exit %d, command %q", code, out)
	}
	if !strings.Contains(errOut, "release: notice: signing skipped: no GitHub Actions OIDC token") {
		t.Errorf("no notice of the skipped signing: %q", errOut)
	}
	out, _, _ = plan(t, "GITHUB_ACTIONS=true")
	if !strings.Contains(out, "::notice title=release::signing skipped") {
		t.Errorf("in a workflow, no GitHub notice: %q", out)
	}
}

func TestWithAnOIDCTokenTheChecksumsAreSigned(t *testing.T) {
	out, errOut, code := plan(t, "ACTIONS_ID_TOKEN_REQUEST_URL=https://token.example/x", "ACTIONS_ID_TOKEN_REQUEST_TOKEN=t")
	if code != 0 || strings.Contains(out, "--skip=sign") || !strings.Contains(errOut, "signed with cosign, keyless") {
		t.Fatalf("exit %d, command %q, stderr %q", code, out, errOut)
	}
}
