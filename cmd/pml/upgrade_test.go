package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// releaseServer serves one release (tag) of pml for linux/amd64 holding
// bin, in GitHub's layout; tamper changes the archive after its checksum
// was taken.
func releaseServer(t *testing.T, tag string, bin []byte, tamper bool) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	_ = tw.WriteHeader(&tar.Header{Name: "pml", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(bin)
	_ = tw.Close()
	_ = zw.Close()
	archive := b.Bytes()
	sum := sha256.Sum256(archive)
	sums := hex.EncodeToString(sum[:]) + "  pml_linux_amd64.tar.gz\n"
	if tamper {
		archive = append([]byte(nil), archive...)
		archive[len(archive)/2] ^= 0xff
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/latest", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/tag/"+tag, http.StatusFound) })
	mux.HandleFunc("/download/"+tag+"/pml_linux_amd64.tar.gz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) })
	mux.HandleFunc("/download/"+tag+"/checksums.txt", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(sums)) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

type upgradeRun struct {
	out     string
	err     error
	applied []byte
}

func runUpgrade(t *testing.T, u upgrader, check bool) upgradeRun {
	t.Helper()
	var r upgradeRun
	u.goos, u.goarch = "linux", "amd64"
	if u.exe == "" {
		u.exe = "/home/ann/.pml/bin/pml"
	}
	u.apply = func(_ string, bin []byte) error { r.applied = bin; return nil }
	var out bytes.Buffer
	cmd := &cobra.Command{Use: "upgrade"}
	cmd.SetOut(&out)
	r.err = u.run(context.Background(), cmd, check)
	r.out = out.String()
	return r
}

func TestUpgradeReplacesAnOlderPmlWithTheLatestRelease(t *testing.T) {
	url := releaseServer(t, "v1.1.0", []byte("pml 1.1.0"), false)
	r := runUpgrade(t, upgrader{base: url, built: versionInfo{Version: "v1.0.0", Built: builtRelease}}, false)
	if r.err != nil || r.out != "✓ Upgraded from v1.0.0 to v1.1.0\n" || string(r.applied) != "pml 1.1.0" {
		t.Fatalf("out %q, err %v, applied %q", r.out, r.err, r.applied)
	}
}

func TestUpgradeSaysAlreadyUpToDate(t *testing.T) {
	url := releaseServer(t, "v1.1.0", []byte("pml 1.1.0"), false)
	for _, check := range []bool{false, true} {
		r := runUpgrade(t, upgrader{base: url, built: versionInfo{Version: "v1.1.0", Built: builtRelease}}, check)
		if r.err != nil || !strings.HasPrefix(r.out, "✓ Already up to date (v1.1.0") || r.applied != nil {
			t.Fatalf("check=%v: out %q, err %v, applied %q", check, r.out, r.err, r.applied)
		}
	}
}

func TestUpgradeCheckExits10WhenANewerReleaseExists(t *testing.T) {
	url := releaseServer(t, "v1.1.0", []byte("pml 1.1.0"), false)
	r := runUpgrade(t, upgrader{base: url, built: versionInfo{Version: "v1.0.0", Built: builtRelease}}, true)
	var ee *exitError
	if !errors.As(r.err, &ee) || ee.code != exitUpgradeAvailable || r.applied != nil || !strings.Contains(r.out, "A newer release exists: v1.1.0") {
		t.Fatalf("out %q, err %v, applied %q", r.out, r.err, r.applied)
	}
}

func TestUpgradeLeavesPmlAloneWhenTheArchiveIsTampered(t *testing.T) {
	url := releaseServer(t, "v1.1.0", []byte("pml 1.1.0"), true)
	r := runUpgrade(t, upgrader{base: url, built: versionInfo{Version: "v1.0.0", Built: builtRelease}}, false)
	if r.err == nil || !strings.Contains(r.err.Error(), "does not match its checksum") || !strings.Contains(r.err.Error(), "left as it was") || r.applied != nil {
		t.Fatalf("out %q, err %v, applied %q", r.out, r.err, r.applied)
	}
}

func TestUpgradeIntoADirectoryItMayNotWriteSaysWhoMay(t *testing.T) {
	url := releaseServer(t, "v1.1.0", []byte("pml 1.1.0"), false)
	var out bytes.Buffer
	cmd := &cobra.Command{Use: "upgrade"}
	cmd.SetOut(&out)
	u := upgrader{exe: "/usr/local/bin/pml", base: url, goos: "linux", goarch: "amd64", built: versionInfo{Version: "v1.0.0", Built: builtRelease},
		apply: func(string, []byte) error {
			return &fs.PathError{Op: "open", Path: "/usr/local/bin/.pml.new", Err: fs.ErrPermission}
		}}
	err := u.run(context.Background(), cmd, false)
	if err == nil || !strings.Contains(err.Error(), "left as it was: run pml upgrade as a user who may write to /usr/local/bin") || out.Len() != 0 {
		t.Fatalf("err %v, out %q", err, out.String())
	}
}

func TestUpgradeRefusesPmlsThatAnotherToolInstalled(t *testing.T) {
	url := releaseServer(t, "v1.1.0", []byte("pml 1.1.0"), false)
	dpkg := func(string) (string, bool) { return "dpkg", true }
	for _, tc := range []struct {
		u    upgrader
		want string
	}{
		{upgrader{exe: "/usr/bin/pml", owns: dpkg, built: versionInfo{Version: "v1.0.0", Built: builtRelease}}, "installed by a Debian package; upgrade it with: sudo apt-get install --only-upgrade pml"},
		{upgrader{exe: "/opt/homebrew/Cellar/pml/1.0.0/bin/pml", built: versionInfo{Version: "v1.0.0", Built: builtRelease}}, "upgrade it with: brew upgrade pml"},
		{upgrader{built: versionInfo{Version: "v1.0.0", Built: builtGoInstall}}, "built by go install; upgrade it with: go install github.com/pml-dev/pml/cmd/pml@latest"},
		{upgrader{built: versionInfo{Version: "dev", Built: builtSource}}, `version "dev" is not a release version`},
		{upgrader{built: versionInfo{Version: "v1.0.0-3-gabc1234", Built: builtSource}}, `version "v1.0.0-3-gabc1234" is not a release version (a build from source)`},
	} {
		tc.u.base = url
		if tc.u.built.Built == builtSource {
			// Refused before any request: offline too.
			tc.u.base = "http://127.0.0.1:1/releases"
		}
		r := runUpgrade(t, tc.u, false)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) || r.applied != nil {
			t.Errorf("%s: err %v, applied %q; want %q", tc.u.exe, r.err, r.applied, tc.want)
		}
	}
}

func TestUpgradeRefusesAReleasesURLThatIsNotHTTPS(t *testing.T) {
	r := runUpgrade(t, upgrader{base: "http://mirror.example.com/releases", built: versionInfo{Version: "v1.0.0", Built: builtRelease}}, false)
	var ee *exitError
	if r.err == nil || errors.As(r.err, &ee) || !strings.Contains(r.err.Error(), `the releases URL "http://mirror.example.com/releases" is not an https URL`) {
		t.Fatalf("err %v", r.err)
	}
}

func TestVersionComesFromTheLinkerThenFromGoInstall(t *testing.T) {
	goInstalled := &debug.BuildInfo{Main: debug.Module{Path: "github.com/pml-dev/pml", Version: "v1.2.3"}}
	checkout := &debug.BuildInfo{Main: debug.Module{Path: "github.com/pml-dev/pml", Version: "(devel)"}}
	for _, tc := range []struct {
		ld, commit    string
		bi            *debug.BuildInfo
		version, kind string
	}{
		{"1.4.0", "abc1234", checkout, "v1.4.0", builtRelease},
		{"v1.4.0-3-gabc1234", "", checkout, "v1.4.0-3-gabc1234", builtSource},
		{"v1.4.0-dirty", "", checkout, "v1.4.0-dirty", builtSource},
		{"0b18ed3", "", checkout, "0b18ed3", builtSource},
		{"0.0.1-snapshot", "abc1234", checkout, "v0.0.1-snapshot", builtRelease},
		{"dev", "", goInstalled, "v1.2.3", builtGoInstall},
		{"dev", "", checkout, "dev", builtSource},
		{"dev", "", nil, "dev", builtSource},
	} {
		v := buildVersion(tc.ld, tc.commit, tc.bi)
		if v.Version != tc.version || v.Built != tc.kind || v.Revision != tc.commit {
			t.Errorf("buildVersion(%q, %q) = %+v, want %s built by %s", tc.ld, tc.commit, v, tc.version, tc.kind)
		}
	}
}
