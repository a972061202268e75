//go:build linux

// Package e2e drives the built `pml` binary against the real Docker daemon:
// real containers, real mounts, real network namespaces. Nothing here is
// faked. Every container the tests cause carries pml's labels with the
// test's own workspace path, so the tests only ever look at (and clean up)
// what they created.
package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/pml-dev/pml/internal/container/containertest"
)

var (
	pmlBin string
	pool   *dockertest.Pool
)

// testUID owns the test workspaces when the tests run as root, so that the
// containers (which never run as root) run as this user.
const testUID = 4321

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Sessions inherit this environment: a developer's own key must never
	// send test calls to the real cloud. Cloud tests run a fake one.
	os.Unsetenv("PML_API_KEY")
	// Standby containers (sandbox.standby) are left by a session for the
	// next one, of no workspace: tests share the daemon and their
	// servers' specs, so one test's would be claimed by another's
	// session and counted among what it left. Off for the tests but
	// those of standbys (standby_test.go) and the benchmarks of a first
	// answer, which set it themselves.
	if _, set := os.LookupEnv("PML_SANDBOX_STANDBY"); !set {
		os.Setenv("PML_SANDBOX_STANDBY", "off")
	}
	// Nor may the developer's credentials file (pml init --api-key): every
	// pml started here reads and writes it under a fresh config directory.
	cfgHome, err := os.MkdirTemp("", "pml-e2e-config-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(cfgHome)
	os.Setenv("XDG_CONFIG_HOME", cfgHome)
	// And the person's trust records (pml trust) are the tests' own.
	stateHome, err := os.MkdirTemp("", "pml-e2e-state-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(stateHome)
	os.Setenv("XDG_STATE_HOME", stateHome)
	pmlBin = os.Getenv("PML_BIN")
	if pmlBin == "" {
		dir, err := os.MkdirTemp("", "pml-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		pmlBin = filepath.Join(dir, "pml")
		if err := buildPML(pmlBin, ""); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: building pml:", err)
			return 1
		}
	}

	pool, err = dockertest.NewPool("")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: docker:", err)
		return 1
	}
	pool.MaxWait = 30 * time.Second
	if err := pool.Retry(func() error { return pool.Client.Ping() }); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: the Docker daemon does not answer (run `make docker`):", err)
		return 1
	}
	// The shell image is built by `make images`; build it here too when the
	// suite is run on its own.
	if _, err := pool.Client.InspectImage("pml/shell:busybox"); err != nil {
		out, err := exec.Command(pmlBin, "images", "build", "--busybox", "/bin/busybox").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: building the shell image (needs Debian's busybox-static; `make images`): %v\n%s", err, out)
			return 1
		}
	}
	// The fault tests' own dockerd, if one was started, goes with them.
	defer stopFaultEngine()
	defer stopVMEngine() // vmengine_test.go
	return m.Run()
}

// buildPML builds a static pml; version changes the binary (and so the
// toolbox image tag) when set.
func buildPML(out, version string) error { return buildPMLWith(out, version, true) }

// buildPMLWith builds pml; without withInside it embeds no in-container
// program at all, as a plain `go build ./cmd/pml` of a fresh clone.
func buildPMLWith(out, version string, withInside bool) error {
	root, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	ld := "-s -w"
	if version != "" {
		ld += " -X main.version=" + version
	}
	// The in-container program for this machine (the daemon's) is built
	// with the same version, so its digest, and the toolbox tag, are new,
	// and put where internal/inside embeds it through a build overlay
	// (the source tree is left alone).
	tmp, err := os.MkdirTemp("", "pml-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	prog := filepath.Join(tmp, "pml-inside")
	run := func(env []string, args ...string) error {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), env...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return nil
	}
	programs := filepath.Join(root, "internal", "inside", "programs")
	replace := map[string]string{}
	if withInside {
		if err := run([]string{"GOOS=linux"}, "build", "-tags", "pml_inside", "-trimpath", "-ldflags", ld, "-o", prog, "./cmd/pml-inside"); err != nil {
			return err
		}
		if err := gzipFile(prog, prog+".gz"); err != nil {
			return err
		}
		replace[filepath.Join(programs, "pml-inside-linux-"+runtime.GOARCH+".gz")] = prog + ".gz"
	} else {
		// An empty replacement deletes the file from the build's view.
		for _, a := range []string{"amd64", "arm64"} {
			replace[filepath.Join(programs, "pml-inside-linux-"+a+".gz")] = ""
		}
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": replace})
	ov := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o600); err != nil {
		return err
	}
	return run(nil, "build", "-overlay", ov, "-trimpath", "-ldflags", ld, "-o", out, "./cmd/pml")
}

// gzipFile writes src gzipped to dst, as the Makefile embeds programs.
func gzipFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(dst, z.Bytes(), 0o644)
}

// workspace is a temporary project directory owned by testUID.
type workspace struct {
	t   *testing.T
	Dir string
}

func newWorkspace(t *testing.T, pmlJSON string) *workspace {
	t.Helper()
	parent := t.TempDir()
	dir := filepath.Join(parent, "ws")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// t.TempDir is 0700; the container user must reach nothing above the
	// mount, but Docker creates the mount point itself, so that is fine.
	dir, _ = filepath.EvalSymlinks(dir)
	w := &workspace{t: t, Dir: dir}
	traces.addDir(t, dir)
	if pmlJSON != "" {
		w.write(".pml.json", pmlJSON)
	}
	w.chown(dir)
	t.Cleanup(func() { assertNoContainers(t, dir) })
	return w
}

func (w *workspace) path(rel string) string { return filepath.Join(w.Dir, rel) }

// write writes a file of the workspace as the person would. The person
// wrote .pml.json, so its content is trusted as `pml trust --yes` does
// (writeUntrusted is what a clone or a container leaves).
func (w *workspace) write(rel, content string) string {
	w.t.Helper()
	p := w.writeUntrusted(rel, content)
	if rel == ".pml.json" {
		w.trust()
	}
	return p
}

// trust runs `pml trust --yes` in the workspace. A file pml cannot read is
// left untrusted (tests of broken files write one on purpose).
func (w *workspace) trust() {
	w.t.Helper()
	cmd := exec.Command(pmlBin, "trust", "--yes")
	cmd.Dir = w.Dir
	cmd.Env = append(os.Environ(), "PML_WORKSPACE="+w.Dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		return
	}
	if err != nil {
		w.t.Fatalf("pml trust --yes: %v\n%s", err, out)
	}
}

// writeUntrusted writes a file of the workspace, and for .pml.json trusts
// nothing.
func (w *workspace) writeUntrusted(rel, content string) string {
	w.t.Helper()
	p := w.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
	for d := filepath.Dir(p); strings.HasPrefix(d, w.Dir); d = filepath.Dir(d) {
		w.chown(d)
	}
	w.chown(p)
	return p
}

func (w *workspace) chown(p string) {
	if os.Geteuid() == 0 {
		if err := os.Lchown(p, testUID, testUID); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *workspace) expectedUID() int {
	if os.Geteuid() == 0 {
		return testUID
	}
	return os.Geteuid()
}

// session is a `pml stdio` process driven by the go-sdk client.
type session struct {
	*mcp.ClientSession
	cmd    *exec.Cmd
	stderr *syncBuffer
}

// syncBuffer keeps a process's stderr for the test while it runs.
type syncBuffer = containertest.Buffer

func startSession(t *testing.T, ws *workspace, env ...string) *session {
	t.Helper()
	return startSessionBin(t, pmlBin, ws, env...)
}

func startSessionBin(t *testing.T, bin string, ws *workspace, env ...string) *session {
	t.Helper()
	return startSessionWith(t, bin, ws, nil, env...)
}

// startSessionWith is startSessionBin with client options (handlers for
// notifications, elicitation…).
func startSessionWith(t *testing.T, bin string, ws *workspace, opts *mcp.ClientOptions, env ...string) *session {
	t.Helper()
	cmd := exec.Command(bin, "stdio", "--log-format", "json", "--log-level", "debug")
	cmd.Env = append(append(os.Environ(), "PML_WORKSPACE="+ws.Dir), env...)
	return connect(t, cmd, opts)
}

// connect runs cmd as an MCP stdio server and connects a go-sdk client to
// it; its stderr is kept for the test, and the session closes at cleanup.
func connect(t *testing.T, cmd *exec.Cmd, opts *mcp.ClientOptions) *session {
	t.Helper()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "pml-e2e", Version: "test"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("starting %v: %v\nstderr:\n%s", cmd.Args, err, stderr.String())
	}
	s := &session{ClientSession: cs, cmd: cmd, stderr: stderr}
	traces.addSession(t, s)
	t.Cleanup(func() { s.Close() })
	return s
}

// logs reports whether pml's stderr says want within a few seconds. A
// line pml wrote before it answered can reach the test after the answer:
// stderr is copied from a pipe by its own goroutine, which a loaded
// machine may not run for a while (TestAReadIsAnsweredByAPreStartedContainer
// failed so under make test-stress), so a check right after a call waits
// for the line rather than sampling once.
func (s *session) logs(want ...string) bool {
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := s.stderr.String()
		all := true
		for _, w := range want {
			all = all && strings.Contains(out, w)
		}
		if all {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// call runs one tool call and returns its text and result.
func (s *session) call(t *testing.T, tool string, args map[string]any) (string, *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v\nstderr:\n%s", tool, err, s.stderr.String())
	}
	return text(res), res
}

func text(res *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

func structured(t *testing.T, res *mcp.CallToolResult, into any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// containersOf lists the containers pml created for workspace dir.
func containersOf(t *testing.T, dir string) []dc.APIContainers {
	t.Helper()
	list, err := pool.Client.ListContainers(dc.ListContainersOptions{
		All:     true,
		Filters: map[string][]string{"label": {"pml.managed=true", "pml.workspace=" + dir}},
	})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	return list
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	waitSaw(t, what, timeout, func() (bool, string) { return cond(), "" })
}

// waitSaw is waitFor for a condition that also says what it saw, so that a
// test that times out says what the state was last (counts, states, pml's
// stderr tail) rather than only that it waited: a wait that fails only on
// a loaded machine has to be diagnosed from its log.
func waitSaw(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	polls := 0
	for {
		ok, saw := cond()
		polls++
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if saw == "" {
				saw = "(the condition says nothing more)"
			}
			t.Fatalf("timed out after %s (%d looks) waiting for %s; last seen: %s%s", time.Since(start).Round(time.Millisecond), polls, what, saw, traces.of(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// traces remembers, per test, the workspaces it made and the pml
// sessions it started, so that a wait that times out can say what the
// containers and pml looked like (a failure seen only on a loaded machine
// is diagnosed from its log).
var traces = &testTraces{m: map[*testing.T]*testTrace{}}

type testTraces struct {
	mu sync.Mutex
	m  map[*testing.T]*testTrace
}

type testTrace struct {
	dirs     []string
	sessions []*session
}

func (tt *testTraces) get(t *testing.T) *testTrace {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tr := tt.m[t]
	if tr == nil {
		tr = &testTrace{}
		tt.m[t] = tr
		t.Cleanup(func() { tt.mu.Lock(); delete(tt.m, t); tt.mu.Unlock() })
	}
	return tr
}

func (tt *testTraces) addDir(t *testing.T, dir string) {
	tr := tt.get(t)
	tt.mu.Lock()
	tr.dirs = append(tr.dirs, dir)
	tt.mu.Unlock()
}

func (tt *testTraces) addSession(t *testing.T, s *session) {
	tr := tt.get(t)
	tt.mu.Lock()
	tr.sessions = append(tr.sessions, s)
	tt.mu.Unlock()
}

// of describes the test's containers and the end of each session's stderr.
func (tt *testTraces) of(t *testing.T) string {
	tt.mu.Lock()
	tr := tt.m[t]
	var dirs []string
	var sessions []*session
	if tr != nil {
		dirs, sessions = append(dirs, tr.dirs...), append(sessions, tr.sessions...)
	}
	tt.mu.Unlock()
	var b strings.Builder
	for _, d := range dirs {
		opts := dc.ListContainersOptions{All: true, Filters: map[string][]string{"label": {"pml.managed=true", "pml.workspace=" + d}}}
		cs, err := pool.Client.ListContainers(opts)
		fmt.Fprintf(&b, "\ncontainers of %s (%v):", d, err)
		for _, c := range cs {
			fmt.Fprintf(&b, " %s %s %s;", c.ID[:12], c.Labels["pml.purpose"], c.State)
		}
	}
	for i, s := range sessions {
		fmt.Fprintf(&b, "\nthe end of pml's stderr (session %d):\n%s", i+1, tail(s.stderr.String()))
	}
	return b.String()
}

// assertNoContainers checks (at cleanup) that pml left nothing behind for
// this workspace, then removes anything that is left so later tests start
// clean. Only containers labelled with this test's workspace are touched.
func assertNoContainers(t *testing.T, dir string) {
	deadline := time.Now().Add(15 * time.Second)
	var left []dc.APIContainers
	for {
		left = containersOf(t, dir)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range left {
		t.Errorf("container %s (%s) was left behind", c.ID[:12], c.Labels["pml.purpose"])
		_ = pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true})
	}
}
