//go:build linux

package e2e

import (
	"syscall"
	"testing"
	"time"
)

// TestACallIsGoneWhenTheClientKillsSoonAfterSIGTERM: codex stops the
// servers it started with SIGTERM and sends SIGKILL about 30 ms later. A
// call running then is stopped, and its container is gone all the same:
// pml's one request is the removal, which the engine finishes after pml
// died (pml used to ask for a kill, wait for the exit, then ask for the
// removal: the SIGKILL came in between and the container stayed, exited
// 137, until the next pml start).
func TestACallIsGoneWhenTheClientKillsSoonAfterSIGTERM(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}}`)
	s := startRaw(t, ws)
	s.send(t, `{"jsonrpc":"2.0","id":"sleep","method":"tools/call","params":{"name":"shell:exec","arguments":{"command":"sleep 60"}}}`)
	waitFor(t, "the sleep 60 container to run", 60*time.Second, func() bool { return len(busyShell(t, ws.Dir, "sleep 60")) > 0 })
	pid := s.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("pml still runs 10 s after SIGKILL")
	}
	// The engine finishes a removal it was asked for: a little time for it.
	deadline := time.Now().Add(10 * time.Second)
	for len(containersOf(t, ws.Dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	noneLeftAfterExit(t, s.stderr, ws)
}

// TestAPreStartInFlightIsGoneWhenTheSessionEnds: the client closes stdin
// right after a call's answer, while the pool's refill of that kind is
// being created and started; once pml has exited, nothing of the
// session is left, running or exited (a pre-start cancelled by Close
// whose create landed after Close's sweep was left behind; so was one
// killed whose removal came too late). Several rounds: where the close
// lands in the pre-start varies.
func TestAPreStartInFlightIsGoneWhenTheSessionEnds(t *testing.T) {
	t.Parallel()
	preStartInFlight(t, func(s *rawSession) { _ = s.stdin.Close() })
}

func preStartInFlight(t *testing.T, stop func(s *rawSession)) {
	var dirs []*workspace
	for i := range 4 {
		ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:read_file"]}}`)
		ws.write("a.txt", "a\n")
		s := startRaw(t, ws)
		s.send(t, `{"jsonrpc":"2.0","id":"read","method":"tools/call","params":{"name":"filesystem:read_file","arguments":{"path":"a.txt"}}}`)
		s.await(t, `"read"`, 60*time.Second)
		// Later each round: into the create, the attach, the start.
		time.Sleep(time.Duration(i) * 40 * time.Millisecond)
		stop(s)
		select {
		case <-s.exited:
		case <-time.After(5*time.Second + 500*time.Millisecond):
			t.Fatalf("round %d: pml still runs 5 s after it was stopped\nstderr:\n%s", i, tail(s.stderr.String()))
		}
		// Checked at once (pml removes its containers before it exits),
		// and again later: a create pml gave up on that the engine
		// finished after pml exited would show only then.
		for _, c := range containersOf(t, ws.Dir) {
			t.Errorf("round %d: container %.12s (%s, %s) outlived its pml", i, c.ID, c.Labels["pml.purpose"], c.Status)
		}
		dirs = append(dirs, ws)
	}
	time.Sleep(3 * time.Second)
	for _, ws := range dirs {
		for _, c := range containersOf(t, ws.Dir) {
			t.Errorf("container %.12s (%s, %s) of %s appeared after its pml exited", c.ID, c.Labels["pml.purpose"], c.Status, ws.Dir)
		}
	}
}
