//go:build linux && release

package release

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// The version the module proxy made here serves this checkout as.
const proxyVersion = "v0.9.0"

// moduleProxy writes a Go module proxy (GOPROXY=file://…, the proxy
// protocol's layout) serving this checkout as github.com/pml-dev/pml at
// proxyVersion, with the files a release tag holds: the tracked ones plus
// the generated in-container program (make release-tag commits it into
// the tag).
func moduleProxy(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	r := run(t, root, os.Environ(), "git", "ls-files", "-z")
	if r.code != 0 {
		t.Fatalf("git ls-files: %s", r.stderr)
	}
	names := strings.Split(strings.TrimRight(r.stdout, "\x00"), "\x00")
	progs, _ := filepath.Glob(filepath.Join(root, "internal/inside/programs/pml-inside-linux-*.gz"))
	if len(progs) != 2 {
		t.Fatalf("the in-container program is not built (%v): make release runs make inside", progs)
	}
	for _, p := range progs {
		names = append(names, strings.TrimPrefix(p, root+"/"))
	}
	var files []zip.File
	for _, n := range names {
		// Tracked files deleted in the work tree are not in the module.
		if st, err := os.Lstat(filepath.Join(root, n)); err == nil && st.Mode().IsRegular() {
			files = append(files, osFile{root, n})
		}
	}
	proxy := t.TempDir()
	dir := filepath.Join(proxy, "github.com", "pml-dev", "pml", "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, proxyVersion+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := zip.Create(f, module.Version{Path: "github.com/pml-dev/pml", Version: proxyVersion}, files); err != nil {
		t.Fatalf("making the module zip: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]any{"Version": proxyVersion, "Time": time.Now().UTC().Format(time.RFC3339)})
	for name, b := range map[string][]byte{proxyVersion + ".mod": gomod, proxyVersion + ".info": info, "list": []byte(proxyVersion + "\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return proxy
}

type osFile struct{ root, name string }

func (f osFile) Path() string                 { return f.name }
func (f osFile) Lstat() (os.FileInfo, error)  { return os.Lstat(filepath.Join(f.root, f.name)) }
func (f osFile) Open() (io.ReadCloser, error) { return os.Open(filepath.Join(f.root, f.name)) }

func TestGoInstallFromAModuleProxyGivesAPmlWhoseToolsWork(t *testing.T) {
	proxy := moduleProxy(t)
	modcache := strings.TrimSpace(run(t, repoRoot(t), os.Environ(), "go", "env", "GOMODCACHE").stdout)
	gobin := t.TempDir()
	home := t.TempDir()
	// Offline: pml from the proxy made here, its dependencies from the
	// module cache's download directory (itself in the proxy layout).
	env := append(os.Environ(), "GOBIN="+gobin, "GOPROXY=file://"+proxy+",file://"+modcache+"/cache/download", "GOSUMDB=off",
		"GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local")
	r := run(t, home, env, "go", "install", "github.com/pml-dev/pml/cmd/pml@"+proxyVersion)
	if r.code != 0 {
		t.Fatalf("go install: exit %d\n%s", r.code, r.stderr)
	}
	pml := filepath.Join(gobin, "pml")
	if v := run(t, home, userEnv(home), pml, "version"); v.code != 0 || !strings.HasPrefix(v.stdout, "pml "+proxyVersion+" ") {
		t.Fatalf("pml version: exit %d %q %s", v.code, v.stdout, v.stderr)
	}
	u := run(t, home, userEnv(home, "PML_RELEASES_URL=http://127.0.0.1:1/releases"), pml, "upgrade")
	if u.code != 1 || !strings.Contains(u.stderr, "built by go install; upgrade it with: go install github.com/pml-dev/pml/cmd/pml@latest") {
		t.Errorf("pml upgrade of a go install build: exit %d %s", u.code, u.stderr)
	}
	firstCall(t, pml, home)
}
