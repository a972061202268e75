package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestUpgradeCheckAnswersForEveryKindOfInstall: --check exits 0 or 10
// whoever installed pml, naming the command that upgrades this one.
func TestUpgradeCheckAnswersForEveryKindOfInstall(t *testing.T) {
	dpkg := func(string) (string, bool) { return "dpkg", true }
	rpm := func(string) (string, bool) { return "rpm", true }
	rel := func(v string) versionInfo { return versionInfo{Version: v, Built: builtRelease} }
	for _, tc := range []struct {
		name string
		u    upgrader
		want string // the command named when a newer release exists
	}{
		{"a .deb", upgrader{exe: "/usr/bin/pml", owns: dpkg, built: rel("v1.0.0")}, "sudo apt-get install --only-upgrade pml"},
		{"an .rpm", upgrader{exe: "/usr/bin/pml", owns: rpm, built: rel("v1.0.0")}, "sudo dnf upgrade pml"},
		{"Homebrew", upgrader{exe: "/opt/homebrew/Cellar/pml/1.0.0/bin/pml", built: rel("v1.0.0")}, "brew upgrade pml"},
		{"Scoop", upgrader{exe: `C:\Users\ann\scoop\apps\pml\current\pml.exe`, built: rel("v1.0.0")}, "scoop update pml"},
		{"go install", upgrader{built: versionInfo{Version: "v1.0.0", Built: builtGoInstall}}, goInstallCmd},
		{"install.sh", upgrader{built: rel("v1.0.0")}, "run pml upgrade"},
		{"make build after a tag", upgrader{built: versionInfo{Version: "v1.0.0-3-gabc1234", Built: builtSource}}, "build it from a newer checkout, or install the release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.u.base = releaseServer(t, "v1.1.0", []byte("pml 1.1.0"), false)
			r := runUpgrade(t, tc.u, true)
			var ee *exitError
			if !errors.As(r.err, &ee) || ee.code != exitUpgradeAvailable || r.applied != nil {
				t.Fatalf("newer release: err %v (want exit %d), applied %q, out %q", r.err, exitUpgradeAvailable, r.applied, r.out)
			}
			if !strings.HasPrefix(r.out, "A newer release exists: v1.1.0 (this pml is "+tc.u.built.Version) || !strings.Contains(r.out, tc.want) || strings.Count(r.out, "\n") != 1 {
				t.Errorf("out %q, want one line naming %q", r.out, tc.want)
			}
			tc.u.base = releaseServer(t, "v1.0.0", []byte("pml 1.0.0"), false)
			r = runUpgrade(t, tc.u, true)
			if r.err != nil || !strings.HasPrefix(r.out, "✓ Already up to date ("+tc.u.built.Version+"; the latest release is v1.0.0)") {
				t.Errorf("up to date: err %v, out %q; want exit 0", r.err, r.out)
			}
		})
	}
}

// TestUpgradeOfflineNamesPMLReleasesURLOnOneLine: an unreachable releases
// URL is one line that says what to do, not the resolver's error chain.
func TestUpgradeOfflineNamesPMLReleasesURLOnOneLine(t *testing.T) {
	// Port 1 on loopback: nothing listens there, the connection is refused.
	for _, check := range []bool{true, false} {
		r := runUpgrade(t, upgrader{base: "http://127.0.0.1:1/releases", built: versionInfo{Version: "v1.0.0", Built: builtRelease}}, check)
		var ee *exitError
		if r.err == nil || errors.As(r.err, &ee) {
			t.Fatalf("check=%v: err %v, want an error (exit 1)", check, r.err)
		}
		msg := r.err.Error()
		for _, want := range []string{"could not reach http://127.0.0.1:1/releases", "the connection was refused", "PML_RELEASES_URL"} {
			if !strings.Contains(msg, want) {
				t.Errorf("check=%v: %q does not say %q", check, msg, want)
			}
		}
		if strings.Contains(msg, "\n") || strings.Contains(msg, "dial tcp") {
			t.Errorf("check=%v: %q is not one plain line", check, msg)
		}
	}
}

// cosignStub is a cosign on PATH for the tests (keyless verification needs
// Sigstore's services, which tests never reach): it records its arguments
// in dir/args and exits with code.
func cosignStub(t *testing.T, code string) (path, args string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the cosign stub is a shell script")
	}
	dir := t.TempDir()
	path, args = filepath.Join(dir, "cosign"), filepath.Join(dir, "args")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + args + "\n[ " + code + " = 0 ] || echo 'Error: none of the expected identities matched what was in the certificate' >&2\nexit " + code + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, args
}

// signedServer serves release tag holding bin for linux/amd64 like
// releaseServer, and with bundle the checksums' signature bundle too.
func signedServer(t *testing.T, tag string, bin []byte, bundle bool) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	_ = tw.WriteHeader(&tar.Header{Name: "pml", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(bin)
	_ = tw.Close()
	_ = zw.Close()
	sum := sha256.Sum256(b.Bytes())
	assets := map[string][]byte{
		"pml_linux_amd64.tar.gz": b.Bytes(),
		"checksums.txt":          []byte(hex.EncodeToString(sum[:]) + "  pml_linux_amd64.tar.gz\n"),
	}
	if bundle {
		assets["checksums.txt.sigstore.json"] = []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/latest", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/tag/"+tag, http.StatusFound) })
	mux.HandleFunc("/download/"+tag+"/{asset}", func(w http.ResponseWriter, r *http.Request) {
		a, ok := assets[r.PathValue("asset")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(a)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func runUpgradeStderr(t *testing.T, u upgrader) (upgradeRun, string) {
	t.Helper()
	var r upgradeRun
	u.goos, u.goarch, u.exe = "linux", "amd64", "/home/ann/.pml/bin/pml"
	u.apply = func(_ string, bin []byte) error { r.applied = bin; return nil }
	var out, errOut bytes.Buffer
	cmd := &cobra.Command{Use: "upgrade"}
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	r.err = u.run(context.Background(), cmd, false)
	r.out = out.String()
	return r, errOut.String()
}

func TestUpgradeVerifiesTheSignatureWithCosignWhenItIsInstalled(t *testing.T) {
	old := versionInfo{Version: "v1.0.0", Built: builtRelease}
	t.Run("a good signature: upgraded, cosign asked about pml's release workflow", func(t *testing.T) {
		cosign, args := cosignStub(t, "0")
		r, errOut := runUpgradeStderr(t, upgrader{base: signedServer(t, "v1.1.0", []byte("pml 1.1.0"), true), built: old, cosign: cosign})
		if r.err != nil || string(r.applied) != "pml 1.1.0" || !strings.Contains(errOut, "Verifying the signature of checksums.txt with "+cosign) {
			t.Fatalf("err %v, applied %q, stderr %q", r.err, r.applied, errOut)
		}
		b, _ := os.ReadFile(args)
		got := strings.Fields(string(b))
		if len(got) != 8 || got[0] != "verify-blob" || got[1] != "--bundle" || !strings.HasSuffix(got[2], "checksums.txt.sigstore.json") ||
			got[4] != `^https://github\.com/pml-dev/pml/\.github/workflows/release\.yml@refs/tags/v` || got[6] != "https://token.actions.githubusercontent.com" || !strings.HasSuffix(got[7], "checksums.txt") {
			t.Errorf("cosign ran with %q", got)
		}
	})
	t.Run("a bad signature: refused, pml left as it was", func(t *testing.T) {
		cosign, _ := cosignStub(t, "1")
		r, _ := runUpgradeStderr(t, upgrader{base: signedServer(t, "v1.1.0", []byte("pml 1.1.0"), true), built: old, cosign: cosign})
		if r.err == nil || r.applied != nil || !strings.Contains(r.err.Error(), "checksums.txt.sigstore.json is not a valid signature of checksums.txt by pml's release workflow") ||
			!strings.Contains(r.err.Error(), "none of the expected identities matched") || !strings.Contains(r.err.Error(), "this pml was left as it was") {
			t.Fatalf("err %v, applied %q", r.err, r.applied)
		}
	})
	t.Run("no signature: refused, naming PML_VERIFY_SIGNATURE=0", func(t *testing.T) {
		cosign, _ := cosignStub(t, "0")
		r, _ := runUpgradeStderr(t, upgrader{base: signedServer(t, "v1.1.0", []byte("pml 1.1.0"), false), built: old, cosign: cosign})
		if r.err == nil || r.applied != nil || !strings.Contains(r.err.Error(), "have no signature to verify (PML_VERIFY_SIGNATURE=0 skips the check") {
			t.Fatalf("err %v, applied %q", r.err, r.applied)
		}
		r, errOut := runUpgradeStderr(t, upgrader{base: signedServer(t, "v1.1.0", []byte("pml 1.1.0"), false), built: old, cosign: cosign, skipSignature: true})
		if r.err != nil || string(r.applied) != "pml 1.1.0" || !strings.Contains(errOut, "PML_VERIFY_SIGNATURE=0: the signature of checksums.txt is not verified, only the archive's checksum") {
			t.Fatalf("PML_VERIFY_SIGNATURE=0: err %v, applied %q, stderr %q", r.err, r.applied, errOut)
		}
	})
	t.Run("no cosign: the checksum alone, and it says so", func(t *testing.T) {
		r, errOut := runUpgradeStderr(t, upgrader{base: signedServer(t, "v1.1.0", []byte("pml 1.1.0"), false), built: old})
		if r.err != nil || string(r.applied) != "pml 1.1.0" || !strings.Contains(errOut, "cosign is not installed: the signature of checksums.txt is not verified, only the archive's checksum") {
			t.Fatalf("err %v, applied %q, stderr %q", r.err, r.applied, errOut)
		}
	})
}

// TestUpgradeFormatJSON: pml upgrade and pml upgrade --check print one
// JSON document with --format json, whatever the exit code, naming who
// installed pml and the command that upgrades it.
func TestUpgradeFormatJSON(t *testing.T) {
	dpkg := func(string) (string, bool) { return "dpkg", true }
	rel := versionInfo{Version: "v1.0.0", Built: builtRelease}
	decode := func(t *testing.T, r upgradeRun) upgradeJSON {
		t.Helper()
		var j upgradeJSON
		if err := json.Unmarshal([]byte(r.out), &j); err != nil {
			t.Fatalf("%v: %q", err, r.out)
		}
		return j
	}
	for _, tc := range []struct {
		name    string
		u       upgrader
		by, cmd string
	}{
		{"install.sh", upgrader{built: rel}, "", ""},
		{"a .deb", upgrader{exe: "/usr/bin/pml", owns: dpkg, built: rel}, "deb", "sudo apt-get install --only-upgrade pml"},
		{"go install", upgrader{built: versionInfo{Version: "v1.0.0", Built: builtGoInstall}}, "go install", goInstallCmd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.u.format = formatJSON
			tc.u.base = releaseServer(t, "v1.1.0", []byte("pml 1.1.0"), false)
			r := runUpgrade(t, tc.u, true)
			var ee *exitError
			if !errors.As(r.err, &ee) || ee.code != exitUpgradeAvailable {
				t.Fatalf("--check: err %v, want exit %d", r.err, exitUpgradeAvailable)
			}
			j := decode(t, r)
			if j.Current != "v1.0.0" || j.Latest != "v1.1.0" || j.UpToDate || j.Upgraded || j.InstalledBy != tc.by || !strings.HasPrefix(j.Command, tc.cmd) || j.Executable == "" {
				t.Errorf("--check: %+v", j)
			}
			tc.u.base = releaseServer(t, "v1.0.0", []byte("pml 1.0.0"), false)
			r = runUpgrade(t, tc.u, true)
			if j := decode(t, r); r.err != nil || !j.UpToDate || j.Latest != "v1.0.0" || j.Upgraded {
				t.Errorf("--check, up to date: err %v, %+v", r.err, j)
			}
		})
	}
	// The upgrade itself: upgraded, and nothing but the document on stdout.
	u := upgrader{built: rel, format: formatJSON, base: releaseServer(t, "v1.1.0", []byte("pml 1.1.0"), false), say: io.Discard}
	r := runUpgrade(t, u, false)
	if j := decode(t, r); r.err != nil || !j.Upgraded || j.UpToDate || j.Latest != "v1.1.0" || string(r.applied) != "pml 1.1.0" {
		t.Errorf("upgrade: err %v, %+v, applied %q", r.err, j, r.applied)
	}
	u.base = releaseServer(t, "v1.0.0", []byte("pml 1.0.0"), false)
	if r := runUpgrade(t, u, false); r.err != nil || !decode(t, r).UpToDate || r.applied != nil {
		t.Errorf("upgrade, up to date: err %v, %q", r.err, r.out)
	}
}
