//go:build linux && release

package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func installScript(t *testing.T) string { return filepath.Join(repoRoot(t), "install.sh") }

func TestInstallScriptInstallsIntoAnEmptyHomeAndPmlWorks(t *testing.T) {
	url := releases(t, dist, tag())
	home := t.TempDir()
	env := userEnv(home, "PML_RELEASES_URL="+url)
	// sh is dash on Debian: install.sh is POSIX sh.
	r := run(t, home, env, "sh", installScript(t))
	pml := filepath.Join(home, ".pml", "bin", "pml")
	if r.code != 0 {
		t.Fatalf("install.sh: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"✓ pml " + tag() + " installed: " + pml, home + "/.pml/bin is not on your PATH", `export PATH="` + home + `/.pml/bin:$PATH"`, "pml init"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("install.sh did not say %q:\n%s", want, r.stdout)
		}
	}
	if v := run(t, home, env, pml, "version"); v.code != 0 || !strings.HasPrefix(v.stdout, "pml "+tag()+" ") {
		t.Fatalf("installed pml version: exit %d %q %s", v.code, v.stdout, v.stderr)
	}
	firstCall(t, pml, home)
	t.Run("the installed pml runs pml demo's calls", func(t *testing.T) {
		r := run(t, home, env, pml, "demo")
		for _, want := range []string{"Hello from the workspace!", "written by a container", "the dial failed", "demo finished"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("pml demo did not print %q (exit %d):\n%s\n%s", want, r.code, r.stdout, r.stderr)
			}
		}
		if r.code != 0 {
			t.Errorf("pml demo: exit %d", r.code)
		}
	})

	t.Run("a second run installs the same pml again and leaves nothing else", func(t *testing.T) {
		before := sha256File(t, pml)
		r := run(t, home, env, "sh", installScript(t))
		if r.code != 0 || !strings.Contains(r.stdout, "✓ pml "+tag()+" installed") {
			t.Fatalf("install.sh again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if sha256File(t, pml) != before {
			t.Error("the second install wrote a different pml")
		}
		ents, _ := os.ReadDir(filepath.Dir(pml))
		if len(ents) != 1 {
			t.Errorf("%s holds %d files, want pml alone: %v", filepath.Dir(pml), len(ents), ents)
		}
	})
	t.Run("PML_INSTALL_DIR on PATH: installed there, no PATH advice", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "tools")
		env := userEnv(home, "PML_RELEASES_URL="+url, "PML_INSTALL_DIR="+dir)
		env[1] = "PATH=" + dir + ":/usr/bin:/bin"
		r := run(t, home, env, "sh", installScript(t))
		if r.code != 0 || strings.Contains(r.stdout, "not on your PATH") {
			t.Fatalf("install.sh: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "pml")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("PML_VERSION installs that release from download/<tag>/", func(t *testing.T) {
		dir := t.TempDir()
		r := run(t, home, userEnv(home, "PML_RELEASES_URL="+url, "PML_INSTALL_DIR="+dir, "PML_VERSION="+tag()), "sh", installScript(t))
		if r.code != 0 || !strings.Contains(r.stdout, "/download/"+tag()) {
			t.Fatalf("install.sh: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = run(t, home, userEnv(home, "PML_RELEASES_URL="+url, "PML_INSTALL_DIR="+dir, "PML_VERSION=v9.9.9"), "sh", installScript(t))
		if r.code == 0 || !strings.Contains(r.stderr, "could not download "+url+"/download/v9.9.9/pml_linux_") {
			t.Fatalf("a missing release: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

func TestInstallScriptRefusesATamperedArchiveAndChangesNothing(t *testing.T) {
	d := copyDist(t)
	tamper(t, filepath.Join(d, "pml_linux_amd64.tar.gz"))
	url := releases(t, d, tag())

	home := t.TempDir()
	r := run(t, home, userEnv(home, "PML_RELEASES_URL="+url), "sh", installScript(t))
	if r.code == 0 || !strings.Contains(r.stderr, "pml_linux_amd64.tar.gz does not match its checksum in checksums.txt") || !strings.Contains(r.stderr, "nothing was installed") {
		t.Fatalf("install.sh: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(home, ".pml")); !os.IsNotExist(err) {
		t.Errorf("a refused install left %s/.pml behind (%v)", home, err)
	}

	// Over an installed pml: it stays as it was.
	dir := t.TempDir()
	old := filepath.Join(dir, "pml")
	if err := os.WriteFile(old, []byte("#!/bin/sh\necho old pml\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = run(t, home, userEnv(home, "PML_RELEASES_URL="+url, "PML_INSTALL_DIR="+dir), "sh", installScript(t))
	if r.code == 0 {
		t.Fatalf("install.sh over an installed pml: exit 0\n%s", r.stdout)
	}
	if b, _ := os.ReadFile(old); string(b) != "#!/bin/sh\necho old pml\n" {
		t.Errorf("the installed pml changed: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%s holds %v, want the old pml alone", dir, ents)
	}
}

// TestInstallScriptReadsTheHostAsCurlDoes: the loopback check reads the URL
// as curl does. A user name before an @ is not the host
// (http://localhost:1@HOST goes to HOST), nor is what follows a ? or a #
// in the authority; a port is digits. Each is refused, changing nothing.
func TestInstallScriptReadsTheHostAsCurlDoes(t *testing.T) {
	for _, u := range []string{
		"http://localhost:1@mirror.example.com/releases",
		"http://127.0.0.1:80@mirror.example.com/releases",
		"http://[::1]@mirror.example.com/releases",
		"http://mirror.example.com?@127.0.0.1/releases",
		"http://mirror.example.com#@localhost/releases",
		`http://localhost\@mirror.example.com/releases`,
		"http://localhost.mirror.example.com/releases",
		"http://127.0.0.1:8x/releases",
	} {
		home := t.TempDir()
		r := run(t, home, userEnv(home, "PML_RELEASES_URL="+u), "sh", installScript(t))
		if r.code == 0 || !strings.Contains(r.stderr, "PML_RELEASES_URL="+u+" is not an https URL (or http to a loopback address); nothing was installed") {
			t.Errorf("install.sh with PML_RELEASES_URL=%s: exit %d, want the refusal\n%s%s", u, r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(home, ".pml")); !os.IsNotExist(err) {
			t.Errorf("a refused install left %s/.pml behind (%v)", home, err)
		}
	}
}

func TestInstallScriptRefusesPlainHTTPBeyondLoopback(t *testing.T) {
	for _, u := range []string{"http://mirror.example.com/releases", "http://127.0.0.1.evil.example/releases", "ftp://mirror.example.com/releases"} {
		home := t.TempDir()
		r := run(t, home, userEnv(home, "PML_RELEASES_URL="+u), "sh", installScript(t))
		if r.code == 0 || !strings.Contains(r.stderr, "PML_RELEASES_URL="+u+" is not an https URL (or http to a loopback address); nothing was installed") {
			t.Fatalf("install.sh: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(home, ".pml")); !os.IsNotExist(err) {
			t.Errorf("a refused install left %s/.pml behind (%v)", home, err)
		}
	}
}
