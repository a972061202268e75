//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dc "github.com/ory/dockertest/v3/docker"
)

// Faults of the container engine itself, against a dockerd of the test's
// own (faultengine_test.go): deadlines are bounds whatever the engine
// does, and what pml says of the call's container is what the engine
// confirmed.

// callBound is how long pml call --timeout 5s may take: the limit plus
// one second, the process's start included.
const (
	faultTimeout = 5 * time.Second
	callBound    = faultTimeout + time.Second
)

// noFalseRemoval fails when text claims a removal the engine could not
// have confirmed.
func noFalseRemoval(t *testing.T, text string) {
	t.Helper()
	if strings.Contains(text, "killed and removed") || strings.Contains(text, "it was removed") {
		t.Errorf("the message claims a removal the frozen engine never confirmed: %q", text)
	}
}

// exitFrozen freezes f, waits for the process whose Wait reports on
// exited to end (90 s at most, then thaws f so it can), thaws f, and
// returns its exit code and how long it ran since began.
func exitFrozen(t *testing.T, f *faultEngine, exited <-chan error, began time.Time) (int, time.Duration) {
	t.Helper()
	f.Freeze(t)
	var err error
	select {
	case err = <-exited:
	case <-time.After(90 * time.Second):
		f.Thaw(t)
		err = <-exited
	}
	took := time.Since(began)
	f.Thaw(t)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return code, took
}

// reapedByNextStart runs a healthy call (the next pml start) and waits
// until no container of ws is left on the engine: what a stopped call
// could not remove is the next start's to reap.
func reapedByNextStart(t *testing.T, f *faultEngine, ws *workspace) {
	t.Helper()
	r := runCLI(t, ws.Dir, f.Env(), "", "call", "shell:exec", `{"command": "echo after"}`, "--timeout", "60s")
	if out := callJSON(t, r); r.code != 0 || !strings.Contains(out.Text, "after") {
		t.Fatalf("the call after the engine was thawed: exit %d %q\n%s", r.code, out.Text, r.stderr)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		left := f.ContainersOf(t, ws.Dir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, c := range left {
				t.Errorf("container %.12s (%s, %s) was left behind after the next pml start", c.ID, c.Labels["pml.purpose"], c.State)
			}
			f.RemoveContainersOf(t, ws.Dir)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestCallTimeoutWithTheEngineFrozenBeforeTheCall: the engine does not
// answer from the start (dockerd SIGSTOPped). pml call --timeout 5s ends
// within 6 s (it took 15 s) and says that no container had been created,
// not that one was "killed and removed".
func TestCallTimeoutWithTheEngineFrozenBeforeTheCall(t *testing.T) {
	f := sharedFaultEngine(t)
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec", "filesystem:list_directory"]}}`)
	t.Cleanup(func() { f.RemoveContainersOf(t, ws.Dir) })
	if r := runCLI(t, ws.Dir, f.Env(), "", "call", "shell:exec", `{"command": "echo ready"}`, "--timeout", "60s"); r.code != 0 {
		t.Fatalf("a call on the fault engine before the fault: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, c := range []struct{ tool, args string }{
		{"shell:exec", `{"command": "echo hi"}`},
		{"filesystem:list_directory", `{"path": "."}`},
	} {
		t.Run(c.tool, func(t *testing.T) {
			f.Freeze(t)
			began := time.Now()
			r := runCLI(t, ws.Dir, f.Env(), "", "call", c.tool, c.args, "--timeout", faultTimeout.String())
			took := time.Since(began)
			f.Thaw(t)
			out := callJSON(t, r)
			t.Logf("%s with the engine frozen: exit %d after %v: %s", c.tool, r.code, took.Round(time.Millisecond), out.Text)
			if took > callBound {
				t.Errorf("pml call --timeout %s took %v with the engine frozen, more than %v", faultTimeout, took.Round(time.Millisecond), callBound)
			}
			if r.code != 124 || !strings.HasPrefix(out.Text, "--timeout 5s expired") {
				t.Errorf("exit %d, text %q", r.code, out.Text)
			}
			if !strings.Contains(out.Text, "no container had been created yet") {
				t.Errorf("the message does not say that no container had been created: %q", out.Text)
			}
			noFalseRemoval(t, out.Text)
		})
	}
	reapedByNextStart(t, f, ws)
}

// TestCallTimeoutWithTheEngineFrozenDuringTheCall: the engine stops
// answering while the call's container runs (sleep 30). pml call
// --timeout 5s ends within 6 s (it took 65 s) and names the container
// that may still run, instead of "killed and removed"; the next pml start
// removes it once the engine answers again.
func TestCallTimeoutWithTheEngineFrozenDuringTheCall(t *testing.T) {
	f := sharedFaultEngine(t)
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}}`)
	t.Cleanup(func() { f.RemoveContainersOf(t, ws.Dir) })

	cmd := exec.Command(pmlBin, "call", "shell:exec", `{"command": "sleep 30"}`, "--timeout", faultTimeout.String())
	cmd.Dir = ws.Dir
	cmd.Env = cliEnv(f.Env()...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var running string
	waitFor(t, "the call's container to run", 4*time.Second, func() bool {
		for _, c := range f.ContainersOf(t, ws.Dir) {
			if c.State == "running" && c.Labels["pml.purpose"] == "pool:shell" {
				running = c.ID
				return true
			}
		}
		return false
	})
	code, took := exitFrozen(t, f, exited, began)
	out := callJSON(t, cliResult{stdout.Bytes(), stderr.Bytes(), code})
	t.Logf("shell:exec sleep 30 with the engine frozen during the call: exit %d after %v: %s", code, took.Round(time.Millisecond), out.Text)
	if took > callBound {
		t.Errorf("pml call --timeout %s took %v with the engine frozen during the call, more than %v", faultTimeout, took.Round(time.Millisecond), callBound)
	}
	if code != 124 || !strings.HasPrefix(out.Text, "--timeout 5s expired") {
		t.Errorf("exit %d, text %q", code, out.Text)
	}
	if !strings.Contains(out.Text, "container "+running[:12]+" may still be running") || !strings.Contains(out.Text, "the next pml start removes it") {
		t.Errorf("the message does not name container %.12s as maybe still running, to be removed by the next start: %q", running, out.Text)
	}
	noFalseRemoval(t, out.Text)
	reapedByNextStart(t, f, ws)
}

// TestCallTimeoutCoversTheReapOfAKilledPml: a pml killed while its
// shell:exec container ran left its journal in .pml/guard (that container
// could write pml's own files), and the engine does not answer
// (SIGSTOP). The next pml call --timeout 5s must first remove that
// container, and waited 15 s for the engine before its own deadline was
// even set (it took 15.1 s, issue 51, item 3). Now the deadline covers
// the reap: the call ends within it (plus slack for a loaded machine),
// exits 124 saying the deadline passed while the engine did not answer
// and that nothing ran, and keeps the journal: once the engine answers,
// the next start removes the container.
func TestCallTimeoutCoversTheReapOfAKilledPml(t *testing.T) {
	f := sharedFaultEngine(t)
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}}`)
	t.Cleanup(func() { f.RemoveContainersOf(t, ws.Dir) })

	cmd := exec.Command(pmlBin, "call", "shell:exec", `{"command": "sleep 60"}`, "--timeout", "90s")
	cmd.Dir = ws.Dir
	cmd.Env = cliEnv(f.Env()...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the call's container to run", 30*time.Second, func() bool {
		for _, c := range f.ContainersOf(t, ws.Dir) {
			if c.State == "running" && c.Labels["pml.purpose"] == "pool:shell" {
				return true
			}
		}
		return false
	})
	journals := func() []string {
		j, _ := filepath.Glob(ws.path(".pml/guard/journal-*.json"))
		return j
	}
	if len(journals()) == 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("no journal in .pml/guard while a shell:exec container runs")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	f.Freeze(t)
	began := time.Now()
	r := runCLI(t, ws.Dir, f.Env(), "", "call", "shell:exec", `{"command": "echo must not run"}`, "--timeout", faultTimeout.String())
	took := time.Since(began)
	f.Thaw(t)
	out := callJSON(t, r)
	t.Logf("pml call --timeout %s with a killed pml's journal and the engine frozen: exit %d after %v: %s", faultTimeout, r.code, took.Round(time.Millisecond), out.Text)
	if bound := faultTimeout + 5*time.Second; took > bound {
		t.Errorf("pml call --timeout %s took %v with a killed pml's journal and the engine frozen, more than %v", faultTimeout, took.Round(time.Millisecond), bound)
	}
	if r.code != 124 || out.Outcome != "timeout" || !strings.HasPrefix(out.Text, "--timeout 5s expired before the call started") {
		t.Errorf("exit %d, outcome %q, text %q, want 124, timeout, the deadline", r.code, out.Outcome, out.Text)
	}
	if !strings.Contains(out.Text, "the container engine did not answer") || !strings.Contains(out.Text, "Nothing ran") {
		t.Errorf("the message does not say the engine did not answer and nothing ran: %q", out.Text)
	}
	if strings.Contains(out.Text, "must not run") || !strings.Contains(string(r.stderr), "--timeout 5s expired") {
		t.Errorf("the command ran, or stderr does not say why it did not:\n%s\n%s", out.Text, r.stderr)
	}
	noFalseRemoval(t, out.Text)
	if len(journals()) == 0 {
		t.Errorf("the killed pml's journal was dropped before its container was removed")
	}
	reapedByNextStart(t, f, ws)
	if j := journals(); len(j) != 0 {
		t.Errorf("after the next start the journal is still there: %v", j)
	}
}

// TestEngineRestartedMidSession: a pml stdio session calls tools, the
// engine hangs during a call (which still ends within its timeout_ms plus
// a second: it took 34 s), is stopped and started again (its containers
// are gone, the connection to it is new), and the session's next calls
// succeed; once the session ends no container of it is left on the
// engine.
func TestEngineRestartedMidSession(t *testing.T) {
	f := sharedFaultEngine(t)
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec", "filesystem:list_directory"]}}`)
	t.Cleanup(func() { f.RemoveContainersOf(t, ws.Dir) })
	ws.write("hello.txt", "hello\n")
	s := startSession(t, ws, f.Env()...)
	call := func(when string) {
		t.Helper()
		if sh, out, res := shell(t, s, "echo "+when); res.IsError || sh.Stdout != when+"\n" {
			t.Errorf("shell:exec %s: %q", when, out)
		}
		if out, res := s.call(t, "filesystem:list_directory", map[string]any{"path": "."}); res.IsError || !strings.Contains(out, "hello.txt") {
			t.Errorf("filesystem:list_directory %s: %q", when, out)
		}
	}
	call("before")
	// The pool has pre-started containers by now. A call runs when the
	// engine hangs (SIGSTOP): it still ends within its own limit
	// (timeout_ms, no caller deadline here) plus a second. Then the
	// person restarts the hung engine (the containers it ran are gone,
	// the connection to it is new).
	waitFor(t, "pre-started containers", 15*time.Second, func() bool { return len(f.ContainersOf(t, ws.Dir)) > 0 })
	type ended struct {
		out  string
		took time.Duration
	}
	running := make(chan ended, 1)
	go func() {
		began := time.Now()
		out, _ := s.call(t, "shell:exec", map[string]any{"command": "sleep 30", "timeout_ms": 4000})
		running <- ended{out, time.Since(began)}
	}()
	// A pre-started container takes the call in milliseconds; the
	// freeze comes well inside the sleep.
	time.Sleep(1500 * time.Millisecond)
	f.Freeze(t)
	var e ended
	select {
	case e = <-running:
	case <-time.After(90 * time.Second):
		f.Thaw(t)
		e = <-running
	}
	t.Logf("the call running when the engine hung (timeout_ms 4000) ended after %v: %s", e.took.Round(time.Millisecond), e.out)
	if e.took > 5*time.Second {
		t.Errorf("the call running when the engine hung took %v, more than its timeout_ms 4000 plus a second", e.took.Round(time.Millisecond))
	}
	if !strings.Contains(e.out, "timed out after 4s") || !strings.Contains(e.out, "may still be running") {
		t.Errorf("the timed-out call's message does not say that its container may still run: %q", e.out)
	}
	noFalseRemoval(t, e.out)
	f.Restart(t)
	began := time.Now()
	call("after")
	t.Logf("the first calls after the engine's restart took %v", time.Since(began).Round(time.Millisecond))
	call("again")
	s.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		left := f.ContainersOf(t, ws.Dir)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, c := range left {
				t.Errorf("container %.12s (%s, %s) was left behind by the session", c.ID, c.Labels["pml.purpose"], c.State)
			}
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The fault engine is the tests' own: starting it (with --bridge none)
// must leave the host's network links alone. dockerd with --bridge none
// deletes docker0, the shared engine's bridge, unless it runs in a network
// namespace of its own; every bridge container of the shared engine then
// failed to start ("could not find bridge docker0").
func TestTheFaultEngineLeavesTheHostsLinksAlone(t *testing.T) {
	// The bridges at the test binary's start and now: an earlier test may
	// have started the fault engine already.
	want := hostBridges(t)
	for name := range bridgesAtStart {
		want[name] = true
	}
	f := sharedFaultEngine(t)
	f.Restart(t)
	after := hostBridges(t)
	for name := range want {
		if !after[name] {
			t.Errorf("the host's bridge %s is gone after the fault engine started (bridges before: %v)", name, want)
		}
	}
}

// bridgesAtStart is read when the test binary starts, before any fault
// engine ran.
var bridgesAtStart = hostBridges(nil)

// hostBridges names the host's bridge links (their /sys/class/net entry
// has a bridge directory); veths come and go with other tests' containers.
func hostBridges(t *testing.T) map[string]bool {
	m := map[string]bool{}
	ifs, err := net.Interfaces()
	if err != nil {
		if t != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, i := range ifs {
		if _, err := os.Stat(filepath.Join("/sys/class/net", i.Name, "bridge")); err == nil {
			m[i.Name] = true
		}
	}
	return m
}

// TestAStandbyOnAFrozenEngine: a session that would adopt a standby
// container (sandbox.standby) finds the engine frozen. pml call
// --timeout 5s ends at its deadline (the server's start held the call
// to the start's own 30 s bound, and pml call gave up on it after 600 ms
// more), says the call never reached the server, and claims no removal;
// once thawed, the next call is answered (from the standby or a fresh
// container) and pml cleanup removes what is left unclaimed.
func TestAStandbyOnAFrozenEngine(t *testing.T) {
	f := sharedFaultEngine(t)
	img := probeImage(t)
	if err := f.load(img); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("sbf%d", time.Now().UnixNano()%1e9)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"prestart": "off"}, "mcps": {%q: {"image": %q, "workspace": "none"}}}`, name, img))
	list := func() []dc.APIContainers {
		l, err := f.Client.ListContainers(dc.ListContainersOptions{All: true, Filters: map[string][]string{"label": {"pml.purpose=mcp:" + name}}})
		if err != nil {
			t.Fatalf("listing the fault engine's containers: %v", err)
		}
		return l
	}
	standbys := func() []string {
		var ids []string
		for _, c := range list() {
			if c.Labels["pml.standby"] != "" && c.State == "running" {
				ids = append(ids, c.ID)
			}
		}
		return ids
	}
	t.Cleanup(func() {
		for _, c := range list() {
			_ = f.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true})
		}
	})
	env := append(f.Env(), "PML_SANDBOX_STANDBY=2m")
	echo := func(timeout string) (cliResult, time.Duration) {
		began := time.Now()
		r := runCLI(t, ws.Dir, env, "", "call", name+":echo", `{"text": "hi"}`, "--timeout", timeout)
		return r, time.Since(began)
	}
	if r, _ := echo("60s"); r.code != 0 {
		t.Fatalf("the first call: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, "the standby the first call left", 20*time.Second, func() bool { return len(standbys()) == 1 })

	f.Freeze(t)
	r, took := echo(faultTimeout.String())
	f.Thaw(t)
	out := callJSON(t, r)
	t.Logf("a call that would adopt the standby, the engine frozen: exit %d after %v: %s", r.code, took.Round(time.Millisecond), out.Text)
	if took > callBound {
		t.Errorf("pml call --timeout %s took %v with the engine frozen, more than %v", faultTimeout, took.Round(time.Millisecond), callBound)
	}
	// The server's start is the server's, not this call's (it serves the
	// calls after it): the call ends at its deadline, and says that it
	// never reached the server, not that the server was told to cancel
	// it, nor that it overran (the start held the call to its end).
	if r.code != 124 || !strings.HasPrefix(out.Text, "--timeout 5s expired") || !strings.Contains(out.Text, "before its server had started (the call never reached it") {
		t.Errorf("exit %d, text %q", r.code, out.Text)
	}
	for _, untrue := range []string{"told to cancel", "did not end within"} {
		if strings.Contains(out.Text, untrue) {
			t.Errorf("the message says %q: %q", untrue, out.Text)
		}
	}
	noFalseRemoval(t, out.Text)

	if r, _ := echo("60s"); r.code != 0 || !strings.Contains(callJSON(t, r).Text, "hi") {
		t.Fatalf("the call after the engine was thawed: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, "a standby after the thawed call", 20*time.Second, func() bool { return len(standbys()) >= 1 })
	if r := runCLI(t, ws.Dir, f.Env(), "", "cleanup"); r.code != 0 || !strings.Contains(string(r.stdout), "standby container(s) that no session had claimed") {
		t.Errorf("pml cleanup: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if l := standbys(); len(l) != 0 {
		t.Errorf("%d standbys left after pml cleanup", len(l))
	}
}
