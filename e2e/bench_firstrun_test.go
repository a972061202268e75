//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/images"
)

// benchFirstWorkflow times the seeds' first workflow (NFR14-5: under five
// minutes from install) as a new user lives it: the snapshot release that
// `make release` made (PML_RELEASE_DIST, default ../dist/release), served
// over HTTP on 127.0.0.1 in GitHub's download layout; install.sh into an
// empty HOME; `pml init --yes --local` in a new project; and the first
// tool call answered (`pml call filesystem:read_file`), with the engine
// running and pml's images absent.
//
// The engine is shared, so the installed pml is given a toolbox name of
// its own (PML_TOOLBOX_REPO, unique to this run) rather than the shared
// pml/toolbox image being removed: the name is checked absent before, pml
// must build it on the first call, and only that image is removed after.
// A first filesystem call needs no other image of pml's (the shell image
// is for shell:exec).
func benchFirstWorkflow(b *testing.B, r *report, _ map[string][]float64) {
	f := figure{ID: "first_workflow", Name: "first workflow: install.sh, pml init, first tool call (pml's images absent)",
		PML:  "the snapshot release served on 127.0.0.1 in GitHub's layout; sh install.sh into an empty HOME; pml init --yes --local in a new project; pml call filesystem:read_file",
		Unit: "s"}
	defer func() { r.add(f) }()
	notMeasured := func(why string) {
		f.ValueText = "not measured: " + why
		if f.Failed {
			f.ValueText = "failed: " + why
		}
	}

	dist := os.Getenv("PML_RELEASE_DIST")
	if dist == "" {
		dist = filepath.Join("..", "dist", "release")
	}
	var meta struct {
		Version string `json:"version"`
		Commit  string `json:"commit"`
		Date    string `json:"date"`
	}
	raw, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	if err == nil {
		err = json.Unmarshal(raw, &meta)
	}
	asset := fmt.Sprintf("pml_linux_%s.tar.gz", runtime.GOARCH)
	if err == nil {
		_, err = os.Stat(filepath.Join(dist, asset))
	}
	if err != nil || meta.Version == "" {
		notMeasured(fmt.Sprintf("no snapshot release in %s (%v): run make release (make bench runs it first)", dist, err))
		return
	}
	tag := "v" + meta.Version

	// The person's machine: an empty HOME, the system PATH, nothing of
	// the developer's or the tests' (XDG_*, PML_*), the engine running.
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		notMeasured(fmt.Sprintf("the engine does not answer: %v %s", err, bytes.TrimSpace(out)))
		return
	}
	repo := fmt.Sprintf("pml-bench-first-%d-%d/toolbox", os.Getpid(), time.Now().UnixNano())
	if ours := imagesOfRepo(b, repo); len(ours) > 0 {
		b.Fatalf("first workflow: %s already has images %v", repo, ours)
	}
	b.Cleanup(func() {
		for _, ref := range imagesOfRepo(b, repo) {
			if out, err := exec.Command("docker", "rmi", ref).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "bench: first workflow: removing %s: %v %s\n", ref, err, out)
			}
		}
	})
	home := b.TempDir()
	project := filepath.Join(home, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "hello.txt"), []byte("hello from the first workflow\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, c := range containersOfB(b, project) {
			_ = exec.Command("docker", "rm", "-f", c).Run()
		}
	})
	env := []string{"HOME=" + home, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
		"PML_RELEASES_URL=" + serveReleases(b, dist, tag), images.ToolboxRepoEnv + "=" + repo}
	for _, k := range []string{"DOCKER_HOST", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	step := func(dir, want string, name string, args ...string) (time.Duration, bool) {
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		t0 := time.Now()
		err := cmd.Run()
		d := time.Since(t0)
		if err != nil || !strings.Contains(out.String(), want) {
			// The workflow itself failed: the target is missed, not
			// left undecided.
			f.Failed = true
			notMeasured(fmt.Sprintf("%s %s: %v (want %q in its output)\n%s%s", filepath.Base(name), strings.Join(args, " "), err, want, out.String(), lastLines(errb.String(), 5)))
			return d, false
		}
		return d, true
	}

	script, err := filepath.Abs(filepath.Join("..", "install.sh"))
	if err != nil {
		b.Fatal(err)
	}
	pml := filepath.Join(home, ".pml", "bin", "pml")
	install, ok := step(home, "✓ pml "+tag+" installed: "+pml, "sh", script)
	if !ok {
		return
	}
	initD, ok := step(project, "", pml, "init", "--yes", "--local")
	if !ok {
		return
	}
	callStart := time.Now()
	call, ok := step(project, "hello from the first workflow", pml, "call", "filesystem:read_file", `{"path": "hello.txt"}`)
	if !ok {
		return
	}
	total := install + initD + call
	ours := imagesOfRepo(b, repo)
	if len(ours) != 1 {
		f.Failed = true
		notMeasured(fmt.Sprintf("the first call should have built one toolbox image named %s, the engine has %v", repo, ours))
		return
	}
	// When the engine had the toolbox image: the image's creation time,
	// on the same host's clock, splits the first call into the image's
	// preparation (the in-container program written out, the image
	// imported) and the call itself (the container started, the answer).
	prep := "image preparation not told apart (the image's creation time is outside the call)"
	if out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Created}}", ours[0]).Output(); err == nil {
		if created, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(out))); err == nil {
			if p := created.Sub(callStart); p > 0 && p < call {
				prep = fmt.Sprintf("image preparation %s (from pml call's start until the engine had %s), first call answered %s later",
					secs(p), ours[0], secs(call-p))
			}
		}
	}
	f.Value = floatp(total.Seconds())
	f.ValueText = fmt.Sprintf("download + install %s, pml init %s, first call %s: %s", secs(install), secs(initD), secs(call), prep)
	f.Note = fmt.Sprintf("the snapshot %s of commit %.12s (made %s); one run; the engine kept its other images (pml's shared ones were not removed: the installed pml was given a toolbox name no image had, PML_TOOLBOX_REPO=%s, removed after); a person's download time from GitHub comes on top of the loopback one", tag, meta.Commit, meta.Date, repo)
}

func secs(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// imagesOfRepo lists the engine's images named repo:<tag>.
func imagesOfRepo(b *testing.B, repo string) []string {
	out, err := exec.Command("docker", "images", "--format", "{{.Repository}}:{{.Tag}}", repo).Output()
	if err != nil {
		b.Fatalf("docker images %s: %v", repo, err)
	}
	return strings.Fields(string(out))
}

// serveReleases serves dir's files as release tag over HTTP on
// 127.0.0.1, laid out as GitHub's downloads (what install.sh reads from
// PML_RELEASES_URL): <url>/latest/download/<asset> and
// <url>/download/<tag>/<asset>.
func serveReleases(b *testing.B, dir, tag string) string {
	files := http.FileServer(http.Dir(dir))
	mux := http.NewServeMux()
	for _, prefix := range []string{"/releases/latest/download/", "/releases/download/" + tag + "/"} {
		mux.Handle("GET "+prefix, http.StripPrefix(strings.TrimSuffix(prefix, "/"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Assets only: no listings, no subdirectories.
			if strings.Count(r.URL.Path, "/") != 1 || strings.HasSuffix(r.URL.Path, "/") {
				http.NotFound(w, r)
				return
			}
			files.ServeHTTP(w, r)
		})))
	}
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	return srv.URL + "/releases"
}
