//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dc "github.com/ory/dockertest/v3/docker"
)

// TestNothingLeftWhenPMLStopsDuringRefills: a client stops pml (each way
// a client does) right after a burst of calls, while the pool's
// replacements for the containers they took are being created and
// started. Once pml is gone, nothing labelled for its workspace is left,
// created, running or exited, even after a create the engine finishes
// late; another pml's session running beside it keeps its containers and
// answers. A stop pml sees (stdin closed, SIGTERM, SIGINT) is cleaned up by
// pml itself; a SIGKILL, alone or 30 ms after SIGTERM as codex sends it,
// by the watcher of its exit that pml stdio starts (pml 6674d15 left the
// pool's containers, a created-never-started one among them, until the
// next pml start: codex's TestCodexProjectFile failed so about 2 runs in
// 12).
func TestNothingLeftWhenPMLStopsDuringRefills(t *testing.T) {
	t.Parallel()
	ways := []struct {
		name string
		stop func(s *rawSession)
	}{
		{"stdin closed", func(s *rawSession) { _ = s.stdin.Close() }},
		{"SIGTERM", func(s *rawSession) { _ = s.cmd.Process.Signal(syscall.SIGTERM) }},
		{"SIGINT", func(s *rawSession) { _ = s.cmd.Process.Signal(syscall.SIGINT) }},
		{"SIGTERM then SIGKILL", func(s *rawSession) {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			time.Sleep(30 * time.Millisecond)
			_ = s.cmd.Process.Signal(syscall.SIGKILL)
		}},
		{"SIGKILL", func(s *rawSession) { _ = s.cmd.Process.Signal(syscall.SIGKILL) }},
	}
	// A bystander: another pml's session on the same daemon, running the
	// whole time. Its containers must outlive every kill (the watcher of
	// a killed pml removes that pml's own and nothing else), and it must
	// keep answering.
	other := newWorkspace(t, `{"permissions": {"allow": ["filesystem:read_file"]}}`)
	other.write("a.txt", "a\n")
	by := startRaw(t, other)
	byCalls := 0
	byCall := func(t *testing.T, what string) {
		t.Helper()
		byCalls++
		id := fmt.Sprintf(`"by%d"`, byCalls)
		by.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"filesystem:read_file","arguments":{"path":"a.txt"}}}`)
		if got := by.await(t, id, 60*time.Second); !strings.Contains(string(got), `"text":"a\n"`) {
			t.Fatalf("the other session's call %s: %s", what, got)
		}
	}
	byCall(t, "at the start")
	for _, way := range ways {
		// One way after the other: another pml starting meanwhile would
		// reap a killed one's leftovers before they are looked for.
		t.Run(way.name, func(t *testing.T) {
			var dirs []*workspace
			for round := range 4 {
				ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:read_file"]}}`)
				ws.write("a.txt", "a\n")
				s := startRaw(t, ws)
				// A first call makes the kind known and its pool fill;
				// then bursts take the ready ones and raise the target,
				// so that several replacements are in flight at the stop.
				s.send(t, `{"jsonrpc":"2.0","id":"r0","method":"tools/call","params":{"name":"filesystem:read_file","arguments":{"path":"a.txt"}}}`)
				s.await(t, `"r0"`, 60*time.Second)
				for burst := range 2 {
					for i := range 3 {
						s.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":"b%d-%d","method":"tools/call","params":{"name":"filesystem:read_file","arguments":{"path":"a.txt"}}}`, burst, i))
					}
					for i := range 3 {
						s.await(t, fmt.Sprintf(`"b%d-%d"`, burst, i), 60*time.Second)
					}
				}
				// Later each round: into the create, the attach, the start.
				time.Sleep(time.Duration(round) * 30 * time.Millisecond)
				byBefore := containersOf(t, other.Dir)
				way.stop(s)
				select {
				case <-s.exited:
				case <-time.After(5*time.Second + 500*time.Millisecond):
					t.Fatalf("round %d: pml still runs 5 s after it was stopped\nstderr:\n%s", round, tail(s.stderr.String()))
				}
				// Checked before the next pml starts: a pml's start reaps
				// what a dead one left, which would hide it. A killed
				// pml's watcher, and the engine finishing what it was
				// asked for, take a moment.
				deadline := time.Now().Add(5 * time.Second)
				for len(containersOf(t, ws.Dir)) > 0 && time.Now().Before(deadline) {
					time.Sleep(100 * time.Millisecond)
				}
				for _, c := range containersOf(t, ws.Dir) {
					t.Errorf("round %d: container %.12s (%s, %s) outlived its pml by 5 s", round, c.ID, c.Labels["pml.purpose"], c.Status)
					_ = pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true})
				}
				byAfter := map[string]bool{}
				for _, c := range containersOf(t, other.Dir) {
					byAfter[c.ID] = true
				}
				for _, c := range byBefore {
					if !byAfter[c.ID] {
						t.Errorf("round %d: the other session's container %.12s (%s) went with the stopped pml", round, c.ID, c.Labels["pml.purpose"])
					}
				}
				byCall(t, fmt.Sprintf("after round %d", round))
				dirs = append(dirs, ws)
			}
			// Nothing may appear later either (a create the engine
			// finished after pml exited).
			time.Sleep(3 * time.Second)
			for _, ws := range dirs {
				for _, c := range containersOf(t, ws.Dir) {
					t.Errorf("container %.12s (%s, %s) of %s outlived its pml", c.ID, c.Labels["pml.purpose"], c.Status, ws.Dir)
					_ = pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true})
				}
			}
		})
	}
}

// exitWatchers are the pids of the watchers of pml pid's exit (pml
// after-exit).
func exitWatchers(pid int) []int {
	var out []int
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if !slices.Contains(args, "after-exit") {
			continue
		}
		i := slices.Index(args, "--owner-pid")
		if i < 0 || i+1 >= len(args) || args[i+1] != strconv.Itoa(pid) {
			continue
		}
		if w, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			out = append(out, w)
		}
	}
	return out
}

// killExitWatcher kills the watcher of pml pid's exit (pml after-exit,
// which removes a killed pml's containers within a moment). Tests of what
// a killed pml leaves (the next start's reap, a container that ends by
// itself) call it before the kill: they test what still holds when the
// watcher is gone too (killed with pml by someone who kills every
// process, or never started: pml serve, a Kubernetes runtime). Builds
// without a watcher have none to kill.
func killExitWatcher(t *testing.T, pid int) {
	t.Helper()
	for _, w := range exitWatchers(pid) {
		if err := syscall.Kill(w, syscall.SIGKILL); err != nil {
			t.Fatalf("killing pml %d's exit watcher %d: %v", pid, w, err)
		}
		// Collected by pml: gone, or a zombie until pml is.
		waitFor(t, "pml's exit watcher to die", 10*time.Second, func() bool { return !running(w) })
	}
}
