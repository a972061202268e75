//go:build linux && release

package release

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestInstallShIsAReleaseAssetAndSigningIsConfigured: install.sh is among
// the assets (release.extra_files; make release copies it into a
// snapshot, whose release step does not run) and listed in the checksums
// file, so the signature covers it; the signing of the checksums file is
// configured but was skipped here, with no GitHub OIDC token (.ci/release.sh
// says so; internal/cicheck tests that notice).
func TestInstallShIsAReleaseAssetAndSigningIsConfigured(t *testing.T) {
	got, err := os.ReadFile(filepath.Join(dist, "install.sh"))
	if err != nil {
		t.Fatalf("install.sh is not among the assets: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(repoRoot(t), "install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("the release's install.sh is not the checkout's")
	}
	sums, _ := os.ReadFile(filepath.Join(dist, "checksums.txt"))
	if !strings.Contains(string(sums), "  install.sh\n") {
		t.Errorf("checksums.txt does not list install.sh:\n%s", sums)
	}
	// GoReleaser's effective configuration, as it ran.
	b, err := os.ReadFile(filepath.Join(dist, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Signs []struct {
			Cmd, Artifacts, Signature string
			Args                      []string
		}
		Release struct {
			ExtraFiles []struct{ Glob string } `yaml:"extra_files"`
		}
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Signs) != 1 || cfg.Signs[0].Cmd != "cosign" || cfg.Signs[0].Artifacts != "checksum" || cfg.Signs[0].Signature != "${artifact}.sigstore.json" ||
		!strings.Contains(strings.Join(cfg.Signs[0].Args, " "), "sign-blob --yes --bundle=${signature}") {
		t.Errorf("signs: %+v, want cosign sign-blob --bundle of the checksums", cfg.Signs)
	}
	if len(cfg.Release.ExtraFiles) != 1 || cfg.Release.ExtraFiles[0].Glob != "./install.sh" {
		t.Errorf("release.extra_files: %+v, want ./install.sh", cfg.Release.ExtraFiles)
	}
	if _, err := os.Stat(filepath.Join(dist, "checksums.txt.sigstore.json")); !os.IsNotExist(err) {
		t.Errorf("a snapshot without an OIDC token has a signature (%v): the signing was not skipped", err)
	}
}

// TestTheReleasesInstallShInstallsPml: curl …/latest/download/install.sh |
// sh, as docs/install.md says, from the release on loopback.
func TestTheReleasesInstallShInstallsPml(t *testing.T) {
	url := releases(t, dist, tag())
	home := t.TempDir()
	r := run(t, home, userEnv(home, "PML_RELEASES_URL="+url, "SHELL=/bin/bash"), "sh", "-c", `curl -fsSL "$PML_RELEASES_URL/latest/download/install.sh" | sh -s -- --modify-path`)
	if r.code != 0 || !strings.Contains(r.stdout, "✓ pml "+tag()+" installed: "+home+"/.pml/bin/pml") || !strings.Contains(r.stdout, "✓ added to "+home+"/.bashrc") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "cosign is not installed: the signature of checksums.txt is not verified") {
		t.Errorf("install.sh did not say that it verified no signature:\n%s", r.stdout)
	}
	v := run(t, home, userEnv(home), "bash", "-ic", "pml version")
	if v.code != 0 || !strings.HasPrefix(v.stdout, "pml "+tag()+" ") {
		t.Errorf("pml version in a new bash (its .bashrc read): exit %d %q %s", v.code, v.stdout, v.stderr)
	}
}
