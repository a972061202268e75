//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// daemonSocket is the real daemon's socket, as the test process reaches
// it.
func daemonSocket(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		p, ok := strings.CutPrefix(h, "unix://")
		if !ok {
			t.Fatalf("these tests forward a unix socket; DOCKER_HOST is %s", h)
		}
		return p
	}
	return "/var/run/docker.sock"
}

// forwarder listens on a new unix socket in a temporary directory and
// forwards each connection to the real daemon: the same daemon at another
// path, which pml can only reach if it chose that path. conns counts the
// connections it forwarded.
type forwarder struct {
	path  string
	conns atomic.Int32
}

func newForwarder(t *testing.T) *forwarder {
	t.Helper()
	return newForwarderAt(t, filepath.Join(t.TempDir(), "engine.sock"))
}

func newForwarderAt(t *testing.T, path string) *forwarder {
	t.Helper()
	target := daemonSocket(t)
	f := &forwarder{path: path}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", f.path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.conns.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				d, err := net.Dial("unix", target)
				if err != nil {
					return
				}
				defer d.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(d, c); _ = d.(*net.UnixConn).CloseWrite(); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, d); _ = c.(*net.UnixConn).CloseWrite(); done <- struct{}{} }()
				<-done
				<-done
			}()
		}
	}()
	return f
}

// dockerCLI runs the docker CLI with DOCKER_CONFIG=cfg, as a person
// setting up a context would.
func dockerCLI(t *testing.T, cfg string, args ...string) string {
	t.Helper()
	cmd := exec.Command("docker", args...)
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+cfg, "DOCKER_HOST=", "DOCKER_CONTEXT=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docker %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// engineEnv is the environment of a pml that must find the engine through
// the Docker configuration in cfg: DOCKER_HOST and DOCKER_CONTEXT unset
// (empty is unset for docker and for pml).
func engineEnv(cfg string, extra ...string) []string {
	return append([]string{"DOCKER_HOST=", "DOCKER_CONTEXT=", "DOCKER_CONFIG=" + cfg}, extra...)
}

// doctorCheck returns the detail of check name in pml doctor --format json.
func doctorCheck(t *testing.T, r cliResult, name string) (status, detail, fix string) {
	t.Helper()
	var rep struct {
		Checks []struct{ Name, Status, Detail, Fix string }
	}
	if err := json.Unmarshal(r.stdout, &rep); err != nil {
		t.Fatalf("doctor output: %v\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	for _, c := range rep.Checks {
		if c.Name == name {
			return c.Status, c.Detail, c.Fix
		}
	}
	t.Fatalf("no %q check in\n%s", name, r.stdout)
	return "", "", ""
}

func TestDockerContextFromATemporaryConfig(t *testing.T) {
	fwd := newForwarder(t)
	cfg := t.TempDir()
	dockerCLI(t, cfg, "context", "create", "pml-e2e", "--docker", "host=unix://"+fwd.path)
	dockerCLI(t, cfg, "context", "use", "pml-e2e") // currentContext in cfg/config.json
	ws := newWorkspace(t, "")
	ws.write("hello.txt", "hello through a context")

	// pml doctor names the context, where docker keeps it and the
	// endpoint, and the engine answers there.
	r := runCLI(t, ws.Dir, engineEnv(cfg), "", "doctor", "--format", "json")
	status, detail, _ := doctorCheck(t, r, "endpoint")
	cfgFile := filepath.Join(cfg, "config.json")
	for _, want := range []string{"unix://" + fwd.path, `Docker context "pml-e2e"`, cfgFile, filepath.Join(cfg, "contexts", "meta")} {
		if status != "ok" || !strings.Contains(detail, want) {
			t.Errorf("endpoint check %s %q lacks %q", status, detail, want)
		}
	}
	if status, detail, _ := doctorCheck(t, r, "docker"); status != "ok" || !strings.Contains(detail, fwd.path) {
		t.Errorf("docker check: %s %q", status, detail)
	}
	if status, detail, _ := doctorCheck(t, r, "mounts"); status != "ok" || !strings.Contains(detail, "any path") {
		t.Errorf("mounts check: %s %q", status, detail)
	}
	// The table names them too.
	r = runCLI(t, ws.Dir, engineEnv(cfg), "", "doctor")
	if !bytes.Contains(r.stdout, []byte("endpoint       unix://"+fwd.path+`, from Docker context "pml-e2e"`)) {
		t.Errorf("doctor table:\n%s", r.stdout)
	}

	// A tool call works through it: the daemon was reached only at the
	// forwarder's path.
	before := fwd.conns.Load()
	r = runCLI(t, ws.Dir, engineEnv(cfg), "", "call", "filesystem:read_file", `{"path": "hello.txt"}`, "--log-level", "error")
	out := callJSON(t, r)
	if r.code != 0 || out.Text != "hello through a context" {
		t.Fatalf("call: exit %d %+v\nstderr:\n%s", r.code, out, r.stderr)
	}
	if fwd.conns.Load() == before {
		t.Error("the call did not go through the context's socket")
	}

	// DOCKER_CONTEXT names it as well, with no config.json at all.
	if err := os.Remove(cfgFile); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, ws.Dir, engineEnv(cfg, "DOCKER_CONTEXT=pml-e2e"), "", "doctor", "--format", "json")
	if status, detail, _ := doctorCheck(t, r, "endpoint"); status != "ok" || !strings.Contains(detail, "from DOCKER_CONTEXT=pml-e2e") || !strings.Contains(detail, fwd.path) {
		t.Errorf("endpoint check: %s %q", status, detail)
	}
}

func TestHostFlagOverridesABrokenDockerHost(t *testing.T) {
	fwd := newForwarder(t)
	ws := newWorkspace(t, "")
	ws.write("hello.txt", "hello through --host")
	broken := []string{"DOCKER_HOST=unix:///nonexistent/pml-e2e.sock"}

	r := runCLI(t, ws.Dir, broken, "", "call", "filesystem:read_file", `{"path": "hello.txt"}`, "--log-level", "error")
	if out := callJSON(t, r); r.code != 5 || !strings.Contains(out.Text, "unix:///nonexistent/pml-e2e.sock") || !strings.Contains(out.Text, "DOCKER_HOST") {
		t.Fatalf("with the broken DOCKER_HOST: exit %d %q", r.code, out.Text)
	}
	before := fwd.conns.Load()
	r = runCLI(t, ws.Dir, broken, "", "call", "--host", "unix://"+fwd.path, "filesystem:read_file", `{"path": "hello.txt"}`, "--log-level", "error")
	if out := callJSON(t, r); r.code != 0 || out.Text != "hello through --host" {
		t.Fatalf("--host: exit %d %+v\nstderr:\n%s", r.code, out, r.stderr)
	}
	if fwd.conns.Load() == before {
		t.Error("--host was not used")
	}
	r = runCLI(t, ws.Dir, broken, "", "doctor", "-H", "unix://"+fwd.path, "--format", "json")
	if status, detail, _ := doctorCheck(t, r, "endpoint"); status != "ok" || detail != "unix://"+fwd.path+", from --host" {
		t.Errorf("endpoint check: %s %q", status, detail)
	}

	// As an MCP client spawns it: `pml stdio --host ...`.
	cmd := exec.Command(pmlBin, "stdio", "--host", "unix://"+fwd.path)
	cmd.Env = cliEnv(append(broken, "PML_WORKSPACE="+ws.Dir)...)
	s := connect(t, cmd, nil)
	if txt, res := s.call(t, "filesystem:read_file", map[string]any{"path": "hello.txt"}); res.IsError || txt != "hello through --host" {
		t.Fatalf("pml stdio --host: %q", txt)
	}
}

func TestAContextThatCannotBeUsedStartsNothing(t *testing.T) {
	cfg := t.TempDir()
	missing := filepath.Join(t.TempDir(), "gone.sock")
	dockerCLI(t, cfg, "context", "create", "pml-e2e-gone", "--docker", "host=unix://"+missing)
	ws := newWorkspace(t, "")
	ws.write("hello.txt", "never read")

	// The context's socket does not exist: the call says which context,
	// which socket, and what to do; nothing starts.
	r := runCLI(t, ws.Dir, engineEnv(cfg, "DOCKER_CONTEXT=pml-e2e-gone"), "", "call", "filesystem:read_file", `{"path": "hello.txt"}`, "--log-level", "error")
	out := callJSON(t, r)
	for _, want := range []string{"unix://" + missing, "DOCKER_CONTEXT=pml-e2e-gone", "docker context ls"} {
		if !strings.Contains(out.Text, want) {
			t.Errorf("text %q lacks %q", out.Text, want)
		}
	}
	if r.code != 5 || out.Outcome != "unavailable" {
		t.Errorf("exit %d outcome %s, want 5 unavailable", r.code, out.Outcome)
	}
	r = runCLI(t, ws.Dir, engineEnv(cfg, "DOCKER_CONTEXT=pml-e2e-gone"), "", "doctor", "--format", "json")
	if status, detail, fix := doctorCheck(t, r, "docker"); status != "fail" || !strings.Contains(detail, missing) || !strings.Contains(fix, "docker context ls") {
		t.Errorf("docker check: %s %q fix %q", status, detail, fix)
	}

	// A context named but not created: exit 2, naming it.
	r = runCLI(t, ws.Dir, engineEnv(cfg, "DOCKER_CONTEXT=pml-e2e-nosuch"), "", "call", "filesystem:read_file", `{"path": "hello.txt"}`)
	out = callJSON(t, r)
	if r.code != 2 || !strings.Contains(out.Text, `"pml-e2e-nosuch"`) || !strings.Contains(out.Text, "docker context ls") {
		t.Errorf("missing context: exit %d %q", r.code, out.Text)
	}
	// A config.json that does not parse: exit 2, naming the file.
	bad := filepath.Join(cfg, "config.json")
	if err := os.WriteFile(bad, []byte(`{"currentContext": `), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, ws.Dir, engineEnv(cfg), "", "call", "filesystem:read_file", `{"path": "hello.txt"}`)
	out = callJSON(t, r)
	if r.code != 2 || !strings.Contains(out.Text, bad) {
		t.Errorf("bad config.json: exit %d %q", r.code, out.Text)
	}
	if n := len(containersOf(t, ws.Dir)); n != 0 {
		t.Errorf("%d containers started", n)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: %v", missing, err)
	}
}

func TestAVMEngineRefusesAWorkspaceItCannotSee(t *testing.T) {
	// The daemon is reached at Docker Desktop's socket path under a
	// temporary home (as Desktop's own context names it): pml takes it
	// for Desktop's VM, which on Linux shares only the home directory.
	// The workspace is outside it.
	home := t.TempDir()
	fwd := newForwarderAt(t, filepath.Join(home, ".docker", "desktop", "docker.sock"))
	ws := newWorkspace(t, "")
	ws.write("hello.txt", "hello from a shared path")
	cfg := filepath.Join(home, ".docker")
	dockerCLI(t, cfg, "context", "create", "desktop-linux", "--docker", "host=unix://"+fwd.path)
	env := []string{"HOME=" + home, "DOCKER_HOST=", "DOCKER_CONTEXT=desktop-linux", "DOCKER_CONFIG=" + cfg}

	r := runCLI(t, ws.Dir, env, "", "doctor", "--format", "json")
	if status, detail, _ := doctorCheck(t, r, "endpoint"); status != "ok" || !strings.Contains(detail, "DOCKER_CONTEXT=desktop-linux") {
		t.Errorf("endpoint check: %s %q", status, detail)
	}
	if status, detail, fix := doctorCheck(t, r, "mounts"); status != "fail" || !strings.Contains(detail, home) || !strings.Contains(detail, ws.Dir) || !strings.Contains(fix, "File sharing") {
		t.Errorf("mounts check: %s %q fix %q", status, detail, fix)
	}

	r = runCLI(t, ws.Dir, env, "", "call", "filesystem:read_file", `{"path": "hello.txt"}`, "--log-level", "error")
	out := callJSON(t, r)
	for _, want := range []string{"Docker Desktop", ws.Dir, "cannot see", "sandbox.shared_paths", "nothing was started"} {
		if !strings.Contains(out.Text, want) {
			t.Errorf("text %q lacks %q", out.Text, want)
		}
	}
	if r.code != 5 {
		t.Errorf("exit %d, want 5", r.code)
	}
	if n := len(containersOf(t, ws.Dir)); n != 0 {
		t.Errorf("%d containers started", n)
	}
	if fwd.conns.Load() == 0 {
		t.Error("pml did not use the Docker Desktop socket")
	}

	// Told that the daemon sees the workspace (it does: it is the same
	// machine), pml runs the call.
	r = runCLI(t, ws.Dir, append(env, "PML_SANDBOX_SHARED_PATHS="+filepath.Dir(ws.Dir)), "", "call", "filesystem:read_file", `{"path": "hello.txt"}`, "--log-level", "error")
	if out := callJSON(t, r); r.code != 0 || out.Text != "hello from a shared path" {
		t.Fatalf("with shared_paths: exit %d %+v\nstderr:\n%s", r.code, out, r.stderr)
	}
}
