//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	dc "github.com/ory/dockertest/v3/docker"
)

// A VM-like engine (issue 57): a dockerd of the test's own, as the fault
// engine is (faultengine_test.go), in its own network AND mount
// namespaces, where a tmpfs hides /tmp, /root and /home — every path pml
// keeps its files in by default, and the tests' workspaces — and only
// the engine's own directory is bound back, with its one shared folder
// (share/) in it: what a desktop VM's file sharing gives. Its socket is
// a file in that directory, reached from the host by path as a VM's
// forwarded socket is, and named like nothing pml knows.
//
// A host that cannot run a second dockerd (not root, no dockerd, no
// unshare) skips these tests; in CI (CI set, as GitHub Actions and
// .ci/run do) that is a failure instead, so that a skip never counts as
// a pass there.

// vmScript runs in the new namespaces: $1 the engine's directory, $2
// the directories to hide, the rest dockerd's arguments. The bind is made
// from the working directory (mount -c: not canonicalized, so "." is the
// directory hidden underneath, not the new empty one of its name).
const vmScript = `set -e
d=$1; hide=$2; shift 2
mount --make-rprivate /
cd "$d"
for h in $hide; do if [ -d "$h" ]; then mount -t tmpfs -o size=16m,mode=0755 pmlvm "$h"; fi; done
mkdir -p "$d"
mount -c --bind . "$d"
cd /
exec dockerd "$@"`

// vmHidden is what the VM-like engine does not see of this machine:
// where pml keeps its files by default (the cache under the home
// directory, its sockets in XDG_RUNTIME_DIR or the temporary directory)
// and where the tests' workspaces are.
func vmHidden() []string {
	hide := []string{"/tmp", "/root", "/home"}
	for _, d := range []string{os.TempDir(), os.Getenv("XDG_RUNTIME_DIR"), os.Getenv("HOME")} {
		if d != "" && !slices.Contains(hide, d) && d != "/" {
			hide = append(hide, d)
		}
	}
	return hide
}

var (
	vmOnce sync.Once
	vmEng  *faultEngine
	vmErr  error
)

// needVMEngine is the skip (or, in CI, the failure) of a host that cannot
// run a VM-like engine.
func needVMEngine(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "a dockerd of the test's own in its own mount namespace needs root"
	}
	for _, p := range []string{"dockerd", "nsenter"} {
		if _, err := exec.LookPath(p); err != nil && why == "" {
			why = "no " + p + " on this host for a VM-like engine"
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s; CI must run the VM-like engine tests (a skip there would count as a pass)", why)
	}
	t.Skip(why)
}

// sharedVMEngine returns the test binary's VM-like engine, started on
// first use with pml's built-in images loaded; TestMain stops it.
func sharedVMEngine(t *testing.T) *faultEngine {
	t.Helper()
	needVMEngine(t)
	vmOnce.Do(func() {
		dir, err := os.MkdirTemp("/tmp", "pv")
		if err != nil {
			vmErr = err
			return
		}
		f := &faultEngine{dir: dir, sock: filepath.Join(dir, "d.sock"), vm: vmHidden()}
		if err := os.MkdirAll(filepath.Join(dir, "share"), 0o755); err != nil {
			vmErr = err
			return
		}
		vmEng = f
		if f.Client, vmErr = dc.NewClient(f.Host()); vmErr != nil {
			return
		}
		if vmErr = f.start(); vmErr != nil {
			return
		}
		vmErr = f.loadImages()
	})
	if vmErr != nil {
		t.Fatalf("starting the VM-like engine: %v", vmErr)
	}
	return vmEng
}

// stopVMEngine stops the VM-like engine and removes its directory.
func stopVMEngine() {
	if vmEng == nil {
		return
	}
	saved := faultEng
	faultEng = vmEng
	stopFaultEngine()
	faultEng = saved
	vmEng = nil
}

// vmShare is the one folder the VM-like engine shares with this machine.
func vmShare(f *faultEngine) string { return filepath.Join(f.dir, "share") }

// inVM writes a file at path as the VM sees it (not this machine): the
// engine's own directory of a name this machine also has.
func inVM(t *testing.T, f *faultEngine, path, content string) {
	t.Helper()
	f.mu.Lock()
	pid := f.cmd.Process.Pid
	f.mu.Unlock()
	cmd := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-m", "sh", "-c", `mkdir -p "$(dirname "$1")" && printf %s "$2" > "$1"`, "sh", path, content)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("writing %s inside the VM-like engine: %v\n%s", path, err, out)
	}
}

// shareWorkspace is a workspace inside the VM-like engine's share,
// removed after the test.
func shareWorkspace(t *testing.T, f *faultEngine, pmlJSON string) *workspace {
	t.Helper()
	dir, err := os.MkdirTemp(vmShare(f), "ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.RemoveContainersOf(t, dir)
		_ = os.RemoveAll(dir)
	})
	w := &workspace{t: t, Dir: dir}
	if pmlJSON != "" {
		w.write(".pml.json", pmlJSON)
	}
	return w
}

// vmEnv points pml at the VM-like engine, with its share as
// sandbox.shared_paths and cache as PML_CACHE_DIR.
func vmEnv(f *faultEngine, cache string) []string {
	return []string{"DOCKER_HOST=" + f.Host(), "PML_SANDBOX_SHARED_PATHS=" + vmShare(f), "PML_CACHE_DIR=" + cache}
}

func TestDoctorTellsAVMEngineByProof(t *testing.T) {
	f := sharedVMEngine(t)
	ws := shareWorkspace(t, f, "{}")
	t.Run("vm", func(t *testing.T) {
		// The cache outside the share: the in-container program is there.
		cache := t.TempDir()
		r := runCLI(t, ws.Dir, vmEnv(f, cache), "", "doctor", "--format", "json")
		defer provedOnce(t, cache, false)
		defer noProofLeft(t, f.Client, cache)
		st, detail, _ := doctorCheck(t, r, "mounts")
		for _, want := range []string{"does not see this machine's files", "proven", vmShare(f)} {
			if !strings.Contains(detail, want) {
				t.Errorf("mounts (%s) %q lacks %q", st, detail, want)
			}
		}
		if st, detail, fix := doctorCheck(t, r, "in-container"); st != "fail" || !strings.Contains(fix, "PML_CACHE_DIR") {
			t.Errorf("in-container is %s on an engine that cannot see it: %q (fix %q)", st, detail, fix)
		}
		if _, detail, _ := doctorCheck(t, r, "egress"); !strings.Contains(detail, "egress container") || strings.Contains(detail, "unix-socket") || strings.Contains(detail, "bridge network") {
			t.Errorf("egress on an engine that cannot reach pml's socket does not name the egress container: %q", detail)
		}
	})
	t.Run("local", func(t *testing.T) {
		cache := t.TempDir()
		r := runCLI(t, ws.Dir, []string{"PML_CACHE_DIR=" + cache}, "", "doctor", "--format", "json")
		defer provedOnce(t, cache, true)
		defer noProofLeft(t, pool.Client, cache)
		if st, detail, _ := doctorCheck(t, r, "mounts"); st != "ok" || !strings.Contains(detail, "proven") || !strings.Contains(detail, "any path") {
			t.Errorf("mounts on the local engine: %s %q", st, detail)
		}
		for _, name := range []string{"in-container", "egress"} {
			if st, detail, _ := doctorCheck(t, r, name); st != "ok" {
				t.Errorf("%s on the local engine: %s %q", name, st, detail)
			}
		}
	})
}

func TestAWorkspaceOutsideTheShareIsRefused(t *testing.T) {
	f := sharedVMEngine(t)
	cache := filepath.Join(vmShare(f), "cache")
	// A workspace of this machine that the VM does not share, whose path
	// the VM also has, with a file of its own there: pml must never show
	// the VM's file as the workspace's.
	ws := newWorkspace(t, "")
	ws.write("notes.txt", "this machine's notes")
	inVM(t, f, ws.path("notes.txt"), "the VM's notes")
	t.Cleanup(func() { f.RemoveContainersOf(t, ws.Dir) })
	r := runCLI(t, ws.Dir, vmEnv(f, cache), "", "call", "filesystem:read_file", `{"path": "notes.txt"}`)
	out := callJSON(t, r)
	if strings.Contains(out.Text, "the VM's notes") {
		t.Fatalf("pml read the VM's file as the workspace's: %q", out.Text)
	}
	if r.code == 0 || !strings.Contains(out.Text, "cannot see "+ws.Dir) || !strings.Contains(out.Text, "sandbox.shared_paths") {
		t.Errorf("exit %d, want a refusal that names the workspace and sandbox.shared_paths: %q\n%s", r.code, out.Text, r.stderr)
	}
	t.Run("pml's own files", func(t *testing.T) {
		// The workspace shared, pml's cache not: shell:exec needs pml's
		// in-container program, and the fix is PML_CACHE_DIR (not the
		// engine's raw "bind source path does not exist").
		in := shareWorkspace(t, f, `{"permissions": {"allow": ["shell:exec"]}}`)
		r := runCLI(t, in.Dir, vmEnv(f, t.TempDir()), "", "call", "shell:exec", `{"command": "echo hi"}`)
		out := callJSON(t, r)
		if r.code == 0 || !strings.Contains(out.Text, "PML_CACHE_DIR") || strings.Contains(out.Text, "bind source path does not exist") {
			t.Errorf("exit %d, want a refusal naming PML_CACHE_DIR: %q", r.code, out.Text)
		}
	})
	t.Run("local", func(t *testing.T) {
		r := runCLI(t, ws.Dir, nil, "", "call", "filesystem:read_file", `{"path": "notes.txt"}`)
		if out := callJSON(t, r); r.code != 0 || !strings.Contains(out.Text, "this machine's notes") {
			t.Errorf("the local engine: exit %d %q", r.code, out.Text)
		}
	})
}

// provedOnce checks that the verdict was kept in the cache (one engine,
// this boot), so the next pml start does not prove again.
func provedOnce(t *testing.T, cache string, seen bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cache, "engine-proofs.json"))
	if err != nil {
		t.Errorf("the verdict was not kept: %v", err)
		return
	}
	var m map[string]struct{ Seen bool }
	if err := json.Unmarshal(b, &m); err != nil || len(m) != 1 {
		t.Errorf("engine-proofs.json: %v\n%s", err, b)
	}
	for k, v := range m {
		if v.Seen != seen {
			t.Errorf("verdict %s: seen %v, want %v", k, v.Seen, seen)
		}
	}
}

// noProofLeft checks that the proof removed its container and markers.
func noProofLeft(t *testing.T, c *dc.Client, cache string) {
	t.Helper()
	list, err := c.ListContainers(dc.ListContainersOptions{All: true, Filters: map[string][]string{"label": {"pml.proof"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range list {
		// Only this proof's: other tests' pml processes on the shared
		// daemon (those reaching it through a socket of their own) prove
		// it too, with markers in their own caches.
		for _, m := range ct.Mounts {
			if strings.HasPrefix(m.Source, cache+string(filepath.Separator)) {
				t.Errorf("the proof left container %.12s behind", ct.ID)
				break
			}
		}
	}
	if left, _ := filepath.Glob(filepath.Join(cache, "pml-proof-*")); len(left) > 0 {
		t.Errorf("the proof left its markers behind: %v", left)
	}
}

// loadIntoVM copies ref from the shared engine into the VM-like one.
func loadIntoVM(t *testing.T, f *faultEngine, ref string) {
	t.Helper()
	if _, err := f.Client.InspectImage(ref); err == nil {
		return
	}
	cmd := exec.Command("sh", "-c", `docker save "$1" | docker -H "$2" load`, "sh", ref, f.Host())
	cmd.Env = cliEnv("DOCKER_HOST=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker save %s | docker load: %v\n%s", ref, err, out)
	}
}
