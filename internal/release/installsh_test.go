package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The tests of install.sh that need no real release (e2e/release runs it
// against make release's snapshot): a release on loopback whose "pml" is a
// shell script printing its version, and the machine's sh, curl and tar.

const installSh = "../../install.sh"

// fakeRelease serves release v1.2.3 for this platform in GitHub's layout;
// with bundle, the checksums' signature bundle too.
func fakeRelease(t *testing.T, bundle bool) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("install.sh is for POSIX shells; Windows users run it from Git Bash, not tested here")
	}
	script := []byte("#!/bin/sh\necho 'pml v1.2.3 (abc1234) go1.26 " + runtime.GOOS + "/" + runtime.GOARCH + "'\n")
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	_ = tw.WriteHeader(&tar.Header{Name: "pml", Mode: 0o755, Size: int64(len(script)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(script)
	_ = tw.Close()
	_ = zw.Close()
	asset := ArchiveName(runtime.GOOS, runtime.GOARCH)
	sum := sha256.Sum256(b.Bytes())
	assets := map[string][]byte{asset: b.Bytes(), ChecksumsFile: []byte(hex.EncodeToString(sum[:]) + "  " + asset + "\n")}
	if bundle {
		assets[SignatureFile] = []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /releases/latest/download/{asset}", func(w http.ResponseWriter, r *http.Request) {
		a, ok := assets[r.PathValue("asset")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(a)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/releases"
}

type shRun struct {
	out, err string
	code     int
}

// install runs install.sh with only the environment given (plus a PATH of
// the system's directories and extra, first).
func install(t *testing.T, extraPath string, env []string, args ...string) shRun {
	t.Helper()
	path := "/usr/bin:/bin"
	if extraPath != "" {
		path = extraPath + ":" + path
	}
	cmd := exec.Command("sh", append([]string{installSh}, args...)...)
	cmd.Env = append([]string{"PATH=" + path}, env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	r := shRun{out: o.String(), err: e.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestInstallScriptSaysHowToPutItsDirectoryOnPATHForTheShell(t *testing.T) {
	url := fakeRelease(t, false)
	for _, tc := range []struct{ shell, rc, line string }{
		{"/bin/bash", ".bashrc", `export PATH="%s:$PATH"`},
		{"/usr/bin/zsh", ".zshrc", `export PATH="%s:$PATH"`},
		{"/usr/bin/fish", ".config/fish/config.fish", `fish_add_path %s`},
		{"/bin/sh", ".profile", `export PATH="%s:$PATH"`},
	} {
		home := t.TempDir()
		dir := home + "/.pml/bin"
		r := install(t, "", []string{"HOME=" + home, "SHELL=" + tc.shell, "PML_RELEASES_URL=" + url})
		want := "  echo '" + strings.Replace(tc.line, "%s", dir, 1) + "' >> " + home + "/" + tc.rc + "\n"
		if r.code != 0 || !strings.Contains(r.out, "✓ pml v1.2.3 installed: "+dir+"/pml") || !strings.Contains(r.out, dir+" is not on your PATH. Add it for your shell") || !strings.Contains(r.out, want) || !strings.Contains(r.out, "--modify-path") {
			t.Errorf("SHELL=%s: exit %d, want %q in\n%s%s", tc.shell, r.code, want, r.out, r.err)
		}
		if _, err := os.Stat(filepath.Join(home, tc.rc)); !os.IsNotExist(err) {
			t.Errorf("SHELL=%s: without --modify-path %s was written (%v)", tc.shell, tc.rc, err)
		}
	}
}

func TestInstallScriptModifyPathAddsTheLineOnceKeepingTheFile(t *testing.T) {
	url := fakeRelease(t, false)
	home := t.TempDir()
	dir := home + "/.pml/bin"
	rc := filepath.Join(home, ".bashrc")
	if err := os.WriteFile(rc, []byte("alias ll='ls -l'"), 0o600); err != nil { // no final newline
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "SHELL=/bin/bash", "PML_RELEASES_URL=" + url}
	line := `export PATH="` + dir + `:$PATH"`
	r := install(t, "", env, "--modify-path")
	if r.code != 0 || !strings.Contains(r.out, "✓ added to "+rc+": "+line) {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
	}
	b, _ := os.ReadFile(rc)
	if string(b) != "alias ll='ls -l'\n# pml (install.sh)\n"+line+"\n" {
		t.Errorf(".bashrc is %q", b)
	}
	if fi, _ := os.Stat(rc); fi.Mode().Perm() != 0o600 {
		t.Errorf(".bashrc's mode became %v", fi.Mode().Perm())
	}
	// Again: the line is there once; and without --modify-path no advice
	// to add it a second time.
	r = install(t, "", env, "--modify-path")
	if r.code != 0 || !strings.Contains(r.out, rc+" already puts "+dir+" on PATH") {
		t.Fatalf("again: exit %d\n%s%s", r.code, r.out, r.err)
	}
	r = install(t, "", env)
	if r.code != 0 || !strings.Contains(r.out, rc+" puts "+dir+" on PATH: open a new terminal") || strings.Contains(r.out, "echo '") {
		t.Fatalf("again without --modify-path: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if b2, _ := os.ReadFile(rc); !bytes.Equal(b, b2) {
		t.Errorf("a second run changed .bashrc: %q", b2)
	}
	if ents, _ := os.ReadDir(home); len(ents) != 2 { // .bashrc and .pml
		t.Errorf("%s holds %v: a temporary file was left", home, ents)
	}

	t.Run("fish: its config directory is made", func(t *testing.T) {
		home := t.TempDir()
		r := install(t, "", []string{"HOME=" + home, "SHELL=/usr/bin/fish", "PML_RELEASES_URL=" + url}, "--modify-path")
		b, _ := os.ReadFile(filepath.Join(home, ".config/fish/config.fish"))
		if r.code != 0 || !strings.Contains(string(b), "fish_add_path "+home+"/.pml/bin\n") {
			t.Errorf("exit %d, config.fish %q\n%s%s", r.code, b, r.out, r.err)
		}
	})
	t.Run("a linked rc file stays a link", func(t *testing.T) {
		home := t.TempDir()
		target := filepath.Join(t.TempDir(), "zshrc")
		if err := os.WriteFile(target, []byte("setopt nobeep\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(home, ".zshrc")); err != nil {
			t.Fatal(err)
		}
		r := install(t, "", []string{"HOME=" + home, "SHELL=/bin/zsh", "PML_RELEASES_URL=" + url}, "--modify-path")
		b, _ := os.ReadFile(target)
		if fi, err := os.Lstat(filepath.Join(home, ".zshrc")); r.code != 0 || err != nil || fi.Mode()&os.ModeSymlink == 0 || !strings.HasPrefix(string(b), "setopt nobeep\n") || !strings.Contains(string(b), home+"/.pml/bin") {
			t.Errorf("exit %d, target %q\n%s%s", r.code, b, r.out, r.err)
		}
	})
	t.Run("an unknown argument changes nothing", func(t *testing.T) {
		home := t.TempDir()
		r := install(t, "", []string{"HOME=" + home, "PML_RELEASES_URL=" + url}, "--modify-paths")
		if r.code != 2 || !strings.Contains(r.err, "unknown argument --modify-paths") {
			t.Errorf("exit %d\n%s%s", r.code, r.out, r.err)
		}
	})
}

// cosignOnPath is a cosign for the tests (keyless verification needs
// Sigstore's services, which tests never reach): it records its arguments
// in its directory's args file and exits with code.
func cosignOnPath(t *testing.T, code string) (dir string) {
	t.Helper()
	dir = t.TempDir()
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + dir + "/args\n[ " + code + " = 0 ] || echo 'Error: none of the expected identities matched what was in the certificate' >&2\nexit " + code + "\n"
	if err := os.WriteFile(filepath.Join(dir, "cosign"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestInstallScriptVerifiesTheSignatureWhenCosignIsInstalled(t *testing.T) {
	signed := fakeRelease(t, true)
	t.Run("a good signature", func(t *testing.T) {
		home, cos := t.TempDir(), cosignOnPath(t, "0")
		r := install(t, cos, []string{"HOME=" + home, "PML_RELEASES_URL=" + signed})
		if r.code != 0 || !strings.Contains(r.out, "✓ checksums.txt is signed by pml's release workflow (cosign)") {
			t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
		}
		b, _ := os.ReadFile(filepath.Join(cos, "args"))
		got := strings.Fields(string(b))
		want := CosignArgs("B", "S")
		if len(got) != len(want) || got[0] != want[0] || got[3] != want[3] || got[4] != want[4] || got[5] != want[5] || got[6] != want[6] ||
			!strings.HasSuffix(got[2], "/"+SignatureFile) || !strings.HasSuffix(got[7], "/"+ChecksumsFile) {
			t.Errorf("cosign ran with %q; pml upgrade runs %q", got, want)
		}
	})
	t.Run("a bad signature: nothing installed", func(t *testing.T) {
		home := t.TempDir()
		r := install(t, cosignOnPath(t, "1"), []string{"HOME=" + home, "PML_RELEASES_URL=" + signed})
		if r.code == 0 || !strings.Contains(r.err, "checksums.txt.sigstore.json is not a valid signature of checksums.txt by pml's release workflow (cosign: Error: none of the expected identities matched") || !strings.Contains(r.err, "nothing was installed") {
			t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
		}
		if _, err := os.Stat(filepath.Join(home, ".pml")); !os.IsNotExist(err) {
			t.Errorf("a refused install left .pml (%v)", err)
		}
	})
	unsigned := fakeRelease(t, false)
	t.Run("no signature: nothing installed, unless PML_VERIFY_SIGNATURE=0", func(t *testing.T) {
		home, cos := t.TempDir(), cosignOnPath(t, "0")
		r := install(t, cos, []string{"HOME=" + home, "PML_RELEASES_URL=" + unsigned})
		if r.code == 0 || !strings.Contains(r.err, "the release's checksums have no signature to verify; nothing was installed (PML_VERIFY_SIGNATURE=0 skips the check") {
			t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
		}
		r = install(t, cos, []string{"HOME=" + home, "PML_RELEASES_URL=" + unsigned, "PML_VERIFY_SIGNATURE=0"})
		if r.code != 0 || !strings.Contains(r.out, "PML_VERIFY_SIGNATURE=0: the signature of checksums.txt is not verified, only the archive's checksum") {
			t.Fatalf("PML_VERIFY_SIGNATURE=0: exit %d\n%s%s", r.code, r.out, r.err)
		}
	})
	t.Run("no cosign: the checksum alone, and it says so", func(t *testing.T) {
		if p, err := exec.LookPath("/usr/bin/cosign"); err == nil {
			t.Skipf("%s is installed", p)
		}
		home := t.TempDir()
		r := install(t, "", []string{"HOME=" + home, "PML_RELEASES_URL=" + signed})
		if r.code != 0 || !strings.Contains(r.out, "cosign is not installed: the signature of checksums.txt is not verified, only the archive's checksum") {
			t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
		}
	})
}
