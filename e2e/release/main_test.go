//go:build linux && release

// Package release checks what `make release` made (PML_RELEASE_DIST, its
// dist/release) the way people get pml: the archives' binaries run, the
// checksums verify, the .deb installs, install.sh and pml upgrade work
// against the snapshot served on loopback in GitHub's download layout, and
// go install from a module proxy made of this checkout gives a pml whose
// tools work. make test-release runs them after make release; without a
// snapshot they fail (they never skip).
package release

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dist is the snapshot's directory; meta its metadata.json.
var (
	dist string
	meta struct {
		ProjectName string `json:"project_name"`
		Version     string `json:"version"`
		Commit      string `json:"commit"`
	}
)

func TestMain(m *testing.M) {
	dist = os.Getenv("PML_RELEASE_DIST")
	if dist == "" {
		fmt.Fprintln(os.Stderr, "e2e/release: PML_RELEASE_DIST is not set: run make test-release (it runs make release first)")
		os.Exit(1)
	}
	b, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	if err == nil {
		err = json.Unmarshal(b, &meta)
	}
	if err == nil && meta.Version == "" {
		err = fmt.Errorf("no version in it")
	}
	// GoReleaser writes "none" when it could not read the git state (it
	// then builds pml without its commit).
	if err == nil && len(meta.Commit) < 12 {
		err = fmt.Errorf("commit %q: GoReleaser did not read the git state", meta.Commit)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e/release: %s/metadata.json: %v: run make release first\n", dist, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// tag is the snapshot's version as a tag (v0.0.1-snapshot).
func tag() string { return "v" + meta.Version }

// releases serves dir as release tag at a loopback URL in GitHub's
// download layout: <url>/latest redirects to <url>/tag/<tag>, assets at
// <url>/latest/download/<asset> and <url>/download/<tag>/<asset>. The
// URL ends in /releases as GitHub's do.
func releases(t *testing.T, dir, tag string) string {
	t.Helper()
	files := http.FileServer(http.Dir(dir))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /releases/latest", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/releases/tag/"+tag, http.StatusFound)
	})
	serve := func(prefix string) {
		mux.Handle("GET "+prefix, http.StripPrefix(strings.TrimSuffix(prefix, "/"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Assets only: no directory listings, no subdirectories.
			if strings.Count(r.URL.Path, "/") != 1 || strings.HasSuffix(r.URL.Path, "/") {
				http.NotFound(w, r)
				return
			}
			files.ServeHTTP(w, r)
		})))
	}
	serve("/releases/latest/download/")
	serve("/releases/download/" + tag + "/")
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/releases"
}

// copyDist copies the snapshot's release assets (its top-level files) into
// a new directory, for tests that change one.
func copyDist(t *testing.T) string {
	t.Helper()
	out := t.TempDir()
	ents, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dist, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
