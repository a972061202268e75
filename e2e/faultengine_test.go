//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dc "github.com/ory/dockertest/v3/docker"
)

// faultEngine is a dockerd of the tests' own, for faults that must never
// touch the shared engine: frozen (SIGSTOP), restarted, gone. It has its
// own socket, data-root, exec-root (a short path: unix socket paths have
// a length limit, and containerd's sockets live under it), pid file and
// containerd namespaces, no bridge and no iptables rules (DESIGN.md,
// "Known pitfalls"), and a network namespace of its own: dockerd started
// with --bridge none deletes the host's docker0 — the shared engine's
// bridge — at start, which left every bridge container of the shared
// engine without a network (seen here: test-k8s's docker check failed on
// "could not find bridge docker0"). pml is pointed at it with Env
// (DOCKER_HOST); its socket is a file, reached from any namespace.
//
// One is started per test binary run, on first use (sharedFaultEngine),
// and stopped by TestMain; tests that use it must not run in parallel
// with each other.
type faultEngine struct {
	dir  string // everything of it: data, exec root, socket, log
	sock string
	// Client talks to it (never to the shared engine).
	Client *dc.Client

	// vm, when set, makes it a VM-like engine (vmengine_test.go): in a
	// mount namespace of its own too, where only dir is left of what
	// vm hides.
	vm []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	frozen bool
}

var (
	faultOnce sync.Once
	faultEng  *faultEngine
	faultErr  error
)

// sharedFaultEngine returns the test binary's fault engine, started on
// first use with pml's toolbox and shell images loaded. Each test leaves
// it running (thawed) and without the containers of the test's
// workspaces (cleanup); a test that cannot have one is skipped.
func sharedFaultEngine(t *testing.T) *faultEngine {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a dockerd of the test's own needs root")
	}
	if _, err := exec.LookPath("dockerd"); err != nil {
		t.Skip("no dockerd on this host for a fault engine of the test's own")
	}
	faultOnce.Do(func() { faultEng, faultErr = startFaultEngine() })
	if faultErr != nil {
		t.Fatalf("starting the fault engine: %v", faultErr)
	}
	f := faultEng
	t.Cleanup(func() {
		f.Thaw(t)
		if err := f.running(); err != nil {
			if err := f.start(); err != nil {
				t.Errorf("restarting the fault engine after the test: %v", err)
			}
		}
	})
	return f
}

// stopFaultEngine stops the fault engine (if one was started) and
// removes everything it had: TestMain calls it after the tests.
func stopFaultEngine() {
	if faultEng == nil {
		return
	}
	f := faultEng
	f.thaw()
	if list, err := f.Client.ListContainers(dc.ListContainersOptions{All: true}); err == nil {
		for _, c := range list {
			_ = f.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true})
		}
	}
	f.stop(20 * time.Second)
	// The data root holds overlay mounts while containers existed;
	// whatever is still mounted under it is unmounted first.
	_ = exec.Command("umount", "-R", "-l", f.dir).Run()
	_ = os.RemoveAll(f.dir)
}

func startFaultEngine() (*faultEngine, error) {
	dir, err := os.MkdirTemp("/tmp", "pf")
	if err != nil {
		return nil, err
	}
	f := &faultEngine{dir: dir, sock: filepath.Join(dir, "d.sock")}
	if f.Client, err = dc.NewClient("unix://" + f.sock); err != nil {
		return nil, err
	}
	if err := f.start(); err != nil {
		stopFaultEngineAt(f)
		return nil, err
	}
	if err := f.loadImages(); err != nil {
		stopFaultEngineAt(f)
		return nil, err
	}
	return f, nil
}

func stopFaultEngineAt(f *faultEngine) {
	faultEng = f
	stopFaultEngine()
	faultEng = nil
}

// Host is the engine's address, as DOCKER_HOST takes it.
func (f *faultEngine) Host() string { return "unix://" + f.sock }

// Env is the environment that points pml (and docker) at this engine.
func (f *faultEngine) Env() []string {
	return []string{"DOCKER_HOST=" + f.Host()}
}

// start runs dockerd and waits until it answers.
func (f *faultEngine) start() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	logf, err := os.OpenFile(filepath.Join(f.dir, "dockerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{
		"--host", f.Host(),
		"--data-root", filepath.Join(f.dir, "data"),
		"--exec-root", filepath.Join(f.dir, "x"),
		"--pidfile", filepath.Join(f.dir, "d.pid"),
		"--bridge", "none", "--iptables=false", "--ip-masq=false",
		// Should it reach a system containerd, its containers stay apart
		// from any other engine's.
		"--containerd-namespace", "pmlfault", "--containerd-plugins-namespace", "pmlfault-plugins",
	}
	cmd := exec.Command("dockerd", args...)
	flags := uintptr(syscall.CLONE_NEWNET)
	if f.vm != nil {
		cmd = exec.Command("sh", append([]string{"-c", vmScript, "vm", f.dir, strings.Join(f.vm, " ")}, args...)...)
		flags |= syscall.CLONE_NEWNS
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Gone with the test binary, even when it is killed; in a network
	// namespace of its own (see faultEngine).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true, Cloneflags: flags}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	f.cmd, f.exited, f.frozen = cmd, exited, false
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := f.Client.Ping(); err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("dockerd exited at start; the end of its log:\n%s", f.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dockerd did not answer within 60 s; the end of its log:\n%s", f.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// running reports whether dockerd runs and answers.
func (f *faultEngine) running() error {
	f.mu.Lock()
	exited := f.exited
	f.mu.Unlock()
	select {
	case <-exited:
		return fmt.Errorf("dockerd exited")
	default:
	}
	return f.Client.Ping()
}

// stop ends dockerd with SIGTERM (it stops its containers, as a person's
// `systemctl stop docker` does), then SIGKILL after grace.
func (f *faultEngine) stop(grace time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cmd == nil {
		return
	}
	_ = f.cmd.Process.Signal(syscall.SIGCONT)
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.exited:
	case <-time.After(grace):
		_ = f.cmd.Process.Kill()
		<-f.exited
	}
	f.cmd = nil
}

// Restart stops dockerd and starts it again on the same data.
func (f *faultEngine) Restart(t *testing.T) {
	t.Helper()
	f.stop(20 * time.Second)
	if err := f.start(); err != nil {
		t.Fatalf("restarting the fault engine: %v", err)
	}
}

// Freeze stops dockerd with SIGSTOP: its socket accepts connections, and
// nothing answers. The containers (run by containerd's shims) go on.
func (f *faultEngine) Freeze(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("freezing the fault engine: %v", err)
	}
	f.frozen = true
}

// Thaw lets a frozen dockerd go on (SIGCONT).
func (f *faultEngine) Thaw(t *testing.T) {
	t.Helper()
	f.thaw()
}

func (f *faultEngine) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cmd != nil && f.frozen {
		_ = f.cmd.Process.Signal(syscall.SIGCONT)
	}
	f.frozen = false
}

// ContainersOf lists the engine's containers of workspace dir.
func (f *faultEngine) ContainersOf(t *testing.T, dir string) []dc.APIContainers {
	t.Helper()
	list, err := f.Client.ListContainers(dc.ListContainersOptions{All: true, Filters: map[string][]string{"label": {"pml.workspace=" + dir}}})
	if err != nil {
		t.Fatalf("listing the fault engine's containers: %v", err)
	}
	return list
}

// RemoveContainersOf force-removes what is left of workspace dir.
func (f *faultEngine) RemoveContainersOf(t *testing.T, dir string) {
	t.Helper()
	for _, c := range f.ContainersOf(t, dir) {
		_ = f.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true})
	}
}

// loadImages copies pml's built-in images (the toolbox and the shell
// image, as this pml names them) from the shared engine: docker save |
// docker load, nothing pulled. An image the shared engine lacks is left
// to pml (it builds its toolbox image itself).
func (f *faultEngine) loadImages() error {
	refs, err := builtinImages()
	if err != nil {
		return err
	}
	return f.load(refs...)
}

// load copies the images refs from the shared engine (docker save |
// docker load).
func (f *faultEngine) load(refs ...string) error {
	if len(refs) == 0 {
		return nil
	}
	save := exec.Command("docker", append([]string{"save"}, refs...)...)
	save.Env = cliEnv("DOCKER_HOST=")
	load := exec.Command("docker", "-H", f.Host(), "load")
	pr, pw := io.Pipe()
	var saveErr, loadOut bytes.Buffer
	save.Stdout, save.Stderr = pw, &saveErr
	load.Stdin, load.Stdout, load.Stderr = pr, &loadOut, &loadOut
	if err := load.Start(); err != nil {
		return err
	}
	serr := save.Run()
	pw.CloseWithError(serr)
	lerr := load.Wait()
	if serr != nil || lerr != nil {
		return fmt.Errorf("docker save %v | docker load: %v %v\n%s%s", refs, serr, lerr, saveErr.String(), loadOut.String())
	}
	return nil
}

// builtinImages are the images of pml's built-in tools that the shared
// engine has (pml list --json, run against it).
func builtinImages() ([]string, error) {
	ws, err := os.MkdirTemp("", "pml-fault-list-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(ws)
	cmd := exec.Command(pmlBin, "list", "--json")
	cmd.Dir = ws
	cmd.Env = cliEnv("PML_WORKSPACE=" + ws)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("pml list --json: %v", err)
	}
	var l struct {
		Builtin []struct {
			Image        string `json:"image"`
			ImagePresent *bool  `json:"image_present"`
		} `json:"builtin"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, fmt.Errorf("pml list --json: %v\n%s", err, out)
	}
	var refs []string
	for _, b := range l.Builtin {
		if b.Image != "" && b.ImagePresent != nil && *b.ImagePresent {
			refs = append(refs, b.Image)
		}
	}
	return refs, nil
}

func (f *faultEngine) logTail() string {
	b, _ := os.ReadFile(filepath.Join(f.dir, "dockerd.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}
