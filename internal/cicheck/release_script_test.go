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

// taggedCheckout is a git repository whose HEAD is tagged v1.0.0, holding
// a copy of .ci/release.sh, for its decisions on a release tag.
func taggedCheckout(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile("../../.ci/release.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir+"/.ci", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/.ci/release.sh", b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "x"}, {"tag", "v1.0.0"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

func planAt(t *testing.T, dir string, env ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command("bash", dir+"/.ci/release.sh", "--plan")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "GIT_CONFIG_GLOBAL=/dev/null"}, env...)
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

// TestOnATagTheReleaseIsPublishedSignedAndSaysWhatItDoesNotPush: on a v*
// tag with an OIDC token the release publishes (no --snapshot) and signs;
// the tap and bucket not pushed for want of a token are named in a
// notice; without an OIDC token nothing is published.
func TestOnATagTheReleaseIsPublishedSignedAndSaysWhatItDoesNotPush(t *testing.T) {
	dir := taggedCheckout(t)
	oidc := []string{"ACTIONS_ID_TOKEN_REQUEST_URL=https://token.example/x", "ACTIONS_ID_TOKEN_REQUEST_TOKEN=t", "GITHUB_ACTIONS=true"}
	out, errOut, code := planAt(t, dir, oidc...)
	if code != 0 || !strings.Contains(out, "goreleaser release --clean\n") {
		t.Fatalf("exit %d, command %q, stderr %q", code, out, errOut)
	}
	for _, want := range []string{"::notice title=release::Homebrew formula not pushed: HOMEBREW_TAP_TOKEN is not set", "::notice title=release::Scoop manifest not pushed: SCOOP_BUCKET_TOKEN is not set"} {
		if !strings.Contains(out, want) {
			t.Errorf("no notice %q in %q", want, out)
		}
	}
	out, _, _ = planAt(t, dir, append(oidc, "HOMEBREW_TAP_TOKEN=x", "SCOOP_BUCKET_TOKEN=y")...)
	if strings.Contains(out, "not pushed") {
		t.Errorf("with both tokens: %q", out)
	}
	_, errOut, code = planAt(t, dir)
	if code == 0 || !strings.Contains(errOut, "a published release has its checksums signed, which needs a GitHub Actions OIDC token") {
		t.Errorf("without OIDC on a tag: exit %d, stderr %q", code, errOut)
	}
}
