//go:build linux

package e2e

// The kill loop runs in make test-faults (make test-all), not in make
// test (.ci/e2e.sh lists it in LATER): every kill point is followed by a
// full npm install of the server (10 to 30 s each here), 5 to 12 minutes
// in all. The rest of pml add's all-or-nothing tests (add_kill_test.go)
// run in make test.

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestAKilledAddChangesNothing kills pml add with SIGKILL at growing
// delays, and at the lines that start the install and end it, until an
// add finishes before its kill. Every time .pml.json is byte-identical to
// before, the trust record unchanged and .pml/deps/memory absent or
// complete; a fresh pml add then succeeds and clears what the killed one
// left (once pml cleanup clears it instead). No container is left
// (newWorkspace's cleanup checks each workspace).
func TestAKilledAddChangesNothing(t *testing.T) {
	needImage(t, nodeImage)
	const initial = `{"permissions": {"allow": ["filesystem:*"]}}` + "\n"
	type point struct {
		after  time.Duration
		atLine string
	}
	points := []point{
		{atLine: "installing memory and listing its tools"},
		{atLine: "installed and verified"},
	}
	// Then by time, doubling until an add ends first (an install takes 10
	// to 30 s here, by load; each kill costs a fresh add, so the loop
	// takes 5 to 12 minutes); an install is bounded by 10 min.
	for _, d := range []time.Duration{50, 200, 500} {
		points = append(points, point{after: d * time.Millisecond})
	}
	for d := time.Second; d < 11*time.Minute; d *= 2 {
		points = append(points, point{after: d})
	}
	began := time.Now()
	kills, cleanupChecked, completed := 0, false, false
	for _, p := range points {
		ws := newWorkspace(t, initial)
		before, trustBefore := readFile(t, ws.path(".pml.json")), trustRecord(t, ws)
		if trustBefore == "" {
			t.Fatal("the workspace's .pml.json has no trust record: this test could not see a change")
		}
		r := runKilledAdd(t, ws, p.after, p.atLine)
		what := p.atLine
		if what == "" {
			what = p.after.String()
		}
		if !r.killed {
			if p.atLine != "" {
				t.Fatalf("pml add ended (exit %d) before the line %q that kills it:\n%s", r.code, p.atLine, r.stderr)
			}
			if r.code != 0 || !strings.Contains(readFile(t, ws.path(".pml.json")), `"memory": {`) {
				t.Fatalf("the unkilled add: exit %d\n%s", r.code, r.stderr)
			}
			t.Logf("kill after %s: pml add finished first, in %s", what, r.took.Round(time.Millisecond))
			completed = true
			break
		}
		kills++
		left := partials(t, ws)
		t.Logf("kill at %s (%s in): partial installs left %v", what, r.took.Round(time.Millisecond), left)
		if after := readFile(t, ws.path(".pml.json")); after != before {
			if strings.Contains(r.stderr, "installed memory in") {
				// Killed in the add's last moment, after its install and
				// listing ended: the write may have been done.
				t.Logf("kill at %s: after the install and listing ended", what)
				continue
			}
			t.Fatalf("killed at %s, .pml.json changed:\n%s\nstderr:\n%s", what, after, r.stderr)
		}
		if tr := trustRecord(t, ws); tr != trustBefore {
			t.Fatalf("killed at %s, the trust record changed:\n%s\nwas:\n%s", what, tr, trustBefore)
		}
		if _, err := os.Stat(ws.path(".pml/deps/memory")); err == nil {
			if deps := readFile(t, ws.path(".pml/deps.json")); !strings.Contains(deps, `"memory"`) {
				t.Fatalf("killed at %s, .pml/deps/memory is there unrecorded (a half-filled install):\n%s", what, deps)
			}
		}
		if len(left) > 0 && !cleanupChecked {
			cleanupChecked = true
			code, stdout, stderr := runPML(t, ws, "cleanup", "--dry-run")
			if code != 0 || !strings.Contains(stdout, "an interrupted install's leftovers: .pml/deps/.partial-memory-") {
				t.Errorf("pml cleanup --dry-run: exit %d\n%s\n%s", code, stdout, stderr)
			}
			if now := partials(t, ws); len(now) != len(left) {
				t.Errorf("the dry run deleted %v (left %v)", left, now)
			}
			code, stdout, stderr = runPML(t, ws, "cleanup")
			if code != 0 || !strings.Contains(stdout, "removed an interrupted install's leftovers: .pml/deps/.partial-memory-") {
				t.Errorf("pml cleanup: exit %d\n%s\n%s", code, stdout, stderr)
			}
			if now := partials(t, ws); len(now) != 0 {
				t.Errorf("pml cleanup left %v", now)
			}
			left = nil
		}
		code, stdout, stderr := runPML(t, ws, "add", killedAddPackage, "--yes", "--allow")
		if code != 0 {
			t.Fatalf("the add after a kill at %s: exit %d\n%s\n%s", what, code, stdout, stderr)
		}
		if len(left) > 0 && !strings.Contains(stderr, "removed an interrupted install's leftovers: .pml/deps/.partial-memory-") {
			t.Errorf("the add after a kill at %s did not say it cleared %v:\n%s", what, left, stderr)
		}
		if now := partials(t, ws); len(now) != 0 {
			t.Errorf("the add after a kill at %s left %v", what, now)
		}
		if cfg := readFile(t, ws.path(".pml.json")); !strings.Contains(cfg, `"memory": {`) || !strings.Contains(cfg, `"memory:*"`) {
			t.Errorf("the add after a kill at %s: .pml.json\n%s", what, cfg)
		}
		if tr := trustRecord(t, ws); tr == trustBefore {
			t.Errorf("the add after a kill at %s did not trust its entry", what)
		}
	}
	if !completed {
		t.Fatalf("every add was killed: the last kill point is too early")
	}
	if !cleanupChecked {
		t.Errorf("no kill left a partial install: pml cleanup's clearing was not checked")
	}
	t.Logf("%d kills, then an add that finished; %s in all", kills, time.Since(began).Round(time.Second))
}

// addRun is one pml add, killed with SIGKILL after a delay or when its
// stderr shows a line (whichever is set), or left to finish.
type addRun struct {
	killed bool
	code   int
	stderr string
	took   time.Duration
}

func runKilledAdd(t *testing.T, ws *workspace, after time.Duration, atLine string) addRun {
	t.Helper()
	cmd := execPML(ws, "add", killedAddPackage, "--yes", "--allow")
	cmd.Dir = ws.Dir
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var stderr strings.Builder
	kill := func() { _ = cmd.Process.Signal(syscall.SIGKILL) }
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			mu.Lock()
			stderr.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if atLine != "" && strings.Contains(sc.Text(), atLine) {
				kill()
			}
		}
	}()
	if after > 0 {
		timer := time.AfterFunc(after, kill)
		defer timer.Stop()
	}
	<-read
	err = cmd.Wait()
	r := addRun{took: time.Since(began), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled():
		r.killed = true
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return r
}
