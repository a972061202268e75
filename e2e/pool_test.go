//go:build linux

package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	dc "github.com/ory/dockertest/v3/docker"
)

// poolContainers lists the running containers of dir's pool kind purpose
// (pool:toolbox, pool:shell, pool:mcp:NAME): pre-started ones waiting for
// a call, and any a call is using at that moment.
func poolContainers(t *testing.T, dir, purpose string) []dc.APIContainers {
	t.Helper()
	var out []dc.APIContainers
	for _, c := range containersOf(t, dir) {
		if c.Labels["pml.purpose"] == purpose && c.State == "running" {
			out = append(out, c)
		}
	}
	return out
}

// waitWarm waits until pml has a pre-started container of purpose ready
// and returns its id: running in Docker, logged by pml as waiting in its
// pool, and not yet taken by a call.
func waitWarm(t *testing.T, s *session, ws *workspace, purpose string) string {
	t.Helper()
	var id string
	waitFor(t, "a pre-started "+purpose+" container", 60*time.Second, func() bool {
		for _, c := range poolContainers(t, ws.Dir, purpose) {
			if s.logged("pool: container pre-started", c.ID) && !s.taken(c.ID) {
				id = c.ID
				return true
			}
		}
		return false
	})
	return id
}

// logged reports whether pml logged msg about container id.
func (s *session) logged(msg, id string) bool {
	for _, line := range strings.Split(s.stderr.String(), "\n") {
		if strings.Contains(line, msg) && strings.Contains(line, id[:12]) {
			return true
		}
	}
	return false
}

// taken reports whether pml logged that a call took container id.
func (s *session) taken(id string) bool {
	return s.logged("pool: pre-started container taken", id)
}

// tookWarm reports whether pml logs, within a few seconds, that a call
// took container id (see session.logs: the line can trail the answer).
func (s *session) tookWarm(id string) bool {
	deadline := time.Now().Add(10 * time.Second)
	for !s.taken(id) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

func exists(t *testing.T, dir, id string) bool {
	for _, c := range containersOf(t, dir) {
		if c.ID == id {
			return true
		}
	}
	return false
}

func TestAReadIsAnsweredByAPreStartedContainer(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	ws.write("a.txt", "from the pool\n")
	s := startSession(t, ws)
	if n := len(containersOf(t, ws.Dir)); n != 0 {
		t.Fatalf("%d containers before the first call: the pool must not start before it is used", n)
	}
	// The first call of a kind starts its own container and warms the pool.
	if out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"}); res.IsError || out != "from the pool\n" {
		t.Fatalf("first read: %q", out)
	}
	warm := waitWarm(t, s, ws, "pool:toolbox")

	out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
	if res.IsError || out != "from the pool\n" {
		t.Fatalf("pooled read: %q", out)
	}
	if !s.tookWarm(warm) {
		t.Fatalf("the read was not given the pre-started container %s:\n%s", warm[:12], s.stderr.String())
	}
	waitFor(t, "the used container to be removed", 30*time.Second, func() bool { return !exists(t, ws.Dir, warm) })
	// A replacement is pre-started for the next call.
	next := waitWarm(t, s, ws, "pool:toolbox")
	if next == warm {
		t.Fatal("the used container came back")
	}
	// Writes use a read-write kind of their own, never a read-only one.
	if out, res := s.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"}); res.IsError {
		t.Fatalf("write: %q", out)
	}
	if s.taken(next) {
		t.Error("a write was given a container with the workspace mounted read-only")
	}
}

func TestTwoShellCallsNeverShareAContainer(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	s := startSession(t, ws)
	first := "echo secret > /tmp/mark; (sleep 300 &); export LEAK=1; echo $$ > /tmp/pid; cat /tmp/mark"
	if out, res := s.call(t, "shell:exec", map[string]any{"command": first}); res.IsError || !strings.Contains(out, "secret") {
		t.Fatalf("first call: %q", out)
	}
	warm := waitWarm(t, s, ws, "pool:shell")
	second := "ls -a /tmp; cat /tmp/mark; ps -o pid,args; echo \"LEAK=$LEAK\"; pwd"
	out, res := s.call(t, "shell:exec", map[string]any{"command": second, "cwd": "."})
	if !s.tookWarm(warm) {
		t.Fatalf("the second call was not given the pre-started container")
	}
	var sh struct {
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
		ExitCode int    `json:"exit_code"`
	}
	structured(t, res, &sh)
	if strings.Contains(sh.Stdout, "secret") || !strings.Contains(sh.Stderr, "No such file") {
		t.Errorf("a file of the first call is visible to the second:\n%s\n%+v", out, sh)
	}
	if strings.Contains(sh.Stdout, "sleep 300") {
		t.Errorf("a process of the first call runs in the second's container:\n%s", out)
	}
	if !strings.Contains(sh.Stdout, "LEAK=\n") || !strings.Contains(sh.Stdout, ws.Dir+"\n") {
		t.Errorf("environment or working directory of the second call:\n%s", out)
	}
}

func TestAShellCallRunsItsCommandExactlyInItsDirectory(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	ws.write("sub/dir/f.txt", "x")
	s := startSession(t, ws)
	// Twice: once cold, once from the pool.
	for i := 0; i < 2; i++ {
		cmd := "pwd\nprintf '%s|' \"$0\" 'quote\\' \"two  spaces\"\nread line; echo \"stdin:[$line]\"\n\n"
		out, res := s.call(t, "shell:exec", map[string]any{"command": cmd, "cwd": "sub/dir"})
		var sh struct {
			Stdout string `json:"stdout"`
		}
		structured(t, res, &sh)
		want := ws.path("sub/dir") + "\n/bin/sh|quote\\|two  spaces|stdin:[]\n"
		if res.IsError || sh.Stdout != want {
			t.Errorf("call %d: stdout %q, want %q (%s)", i, sh.Stdout, want, out)
		}
		if i == 0 {
			waitWarm(t, s, ws, "pool:shell")
		}
	}
	out, res := s.call(t, "shell:exec", map[string]any{"command": "true", "cwd": "missing"})
	if !res.IsError || !strings.Contains(out, "not an existing directory") {
		t.Errorf("a missing cwd: %q", out)
	}
}

// TestAPerCallServerGetsAFreshContainerForEveryCall runs the go-sdk memory
// server (an in-memory knowledge graph) with "lifetime": "per_call": what
// one call stores is gone in the next, because each runs in its own
// container.
func TestAPerCallServerGetsAFreshContainerForEveryCall(t *testing.T) {
	needImage(t, memoryImage)
	cfg := fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"memory": {"image": %q, "workspace": "none", "lifetime": "per_call"}}}`, memoryImage)
	ws := newWorkspace(t, cfg)
	s := startSession(t, ws)
	create := map[string]any{"entities": []any{map[string]any{"name": "pml", "entityType": "project", "observations": []any{"remembered"}}}}
	if out, res := s.call(t, "memory:create_entities", create); res.IsError || !strings.Contains(structuredJSON(res), "remembered") {
		t.Fatalf("create_entities: %q %s", out, structuredJSON(res))
	}
	if out, res := s.call(t, "memory:read_graph", nil); res.IsError || strings.Contains(out+structuredJSON(res), "remembered") {
		t.Fatalf("the second call saw the first call's graph: %q %s", out, structuredJSON(res))
	}
	warm := waitWarm(t, s, ws, "pool:mcp:memory")
	if out, res := s.call(t, "memory:create_entities", create); res.IsError || !strings.Contains(structuredJSON(res), "remembered") {
		t.Fatalf("create_entities from the pool: %q", out)
	}
	if !s.tookWarm(warm) {
		t.Error("the per-call server was not served from the pool")
	}
	if out, res := s.call(t, "memory:read_graph", nil); res.IsError || strings.Contains(out+structuredJSON(res), "remembered") {
		t.Fatalf("a pooled call saw the previous call's graph: %q %s", out, structuredJSON(res))
	}
	for _, c := range containersOf(t, ws.Dir) {
		if c.Labels["pml.purpose"] == "mcp:memory" {
			t.Errorf("a long-lived container (%s) of a per_call server is still running", c.ID[:12])
		}
	}
}

func TestNothingIsLeftWhenTheSessionEnds(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	ws.write("a.txt", "a")
	s := startSession(t, ws)
	s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
	s.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "b"})
	s.call(t, "shell:exec", map[string]any{"command": "true"})
	waitWarm(t, s, ws, "pool:toolbox")
	waitWarm(t, s, ws, "pool:shell")
	if n := len(containersOf(t, ws.Dir)); n < 2 {
		t.Fatalf("%d containers: the pool is not warm, the test proves nothing", n)
	}
	if err := s.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if st := s.cmd.ProcessState; st == nil || !st.Exited() || st.ExitCode() != 0 {
		t.Errorf("pml did not exit cleanly: %v", st)
	}
	// Checked at once: pml removes its pool before it exits.
	for _, c := range containersOf(t, ws.Dir) {
		t.Errorf("container %s (%s) outlived its pml", c.ID[:12], c.Labels["pml.purpose"])
	}
}

// warmPools starts a pml whose toolbox and shell pools each hold a
// pre-started container waiting for a call.
func warmPools(t *testing.T) (*workspace, *session) {
	t.Helper()
	ws := newWorkspace(t, allowAll)
	ws.write("a.txt", "a")
	s := startSession(t, ws)
	s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
	s.call(t, "shell:exec", map[string]any{"command": "true"})
	waitWarm(t, s, ws, "pool:toolbox")
	waitWarm(t, s, ws, "pool:shell")
	return ws, s
}

func TestAWarmPoolOfAKilledPMLIsReapedByTheNextStart(t *testing.T) {
	ws, s := warmPools(t)
	pid := s.cmd.Process.Pid
	killExitWatcher(t, pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pml to die", 10*time.Second, func() bool { return !running(pid) })
	left := containersOf(t, ws.Dir)
	if len(left) < 2 {
		t.Fatalf("%d containers after kill -9: the pool vanished with pml, the test proves nothing", len(left))
	}
	startSession(t, ws)
	waitFor(t, "the next pml to reap the orphaned pool", 30*time.Second, func() bool { return len(containersOf(t, ws.Dir)) == 0 })
}

// TestAPoolIsGoneWhenTheClientKillsSoonAfterSIGTERM: codex stops the
// servers it started with SIGTERM and sends SIGKILL about 30 ms later.
// pml's pre-started containers are gone all the same, not left for the
// next start to find (pml used to ask the engine to kill each container
// and, once it had stopped, to remove it: the SIGKILL came in between and
// the container stayed, exited).
func TestAPoolIsGoneWhenTheClientKillsSoonAfterSIGTERM(t *testing.T) {
	t.Parallel()
	ws, s := warmPools(t)
	pid := s.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, "pml to die", 10*time.Second, func() bool { return !running(pid) })
	// The engine finishes a removal it was asked for: a little time for it.
	deadline := time.Now().Add(10 * time.Second)
	for len(containersOf(t, ws.Dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	noneLeftAfterExit(t, s.stderr, ws)
}

func TestAPoolContainerKilledWhileWaitingIsNeverHandedOut(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	ws.write("a.txt", "still works\n")
	s := startSession(t, ws)
	s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
	victim := waitWarm(t, s, ws, "pool:toolbox")
	if err := pool.Client.KillContainer(dc.KillContainerOptions{ID: victim, Signal: dc.SIGKILL}); err != nil {
		t.Fatal(err)
	}
	// pml notices the death and removes the container.
	waitFor(t, "pml to remove the dead container", 30*time.Second, func() bool { return !exists(t, ws.Dir, victim) })
	out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
	if res.IsError || out != "still works\n" {
		t.Fatalf("the call after the kill: %q", out)
	}
	if s.taken(victim) {
		t.Fatal("the killed container was handed out")
	}
	if !s.logs("exited while waiting") {
		t.Error("pml did not report the dead pool container")
	}
}
