//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAnAddKilledBetweenItsInstallAndItsRecordLeavesNoUnrecordedInstall
// kills pml add at the one moment TestAKilledAddChangesNothing's kill at
// 8 s found by chance (make test-faults, once in CI): its install is
// complete and verified, and .pml/deps.json does not record it yet. The
// test holds .pml/deps/.lock, the lock pml takes to write deps.json, from
// the moment the install's partial directory appears: pml then stops at
// its record. The old order renamed the install into .pml/deps/memory
// first, and a kill there left it unrecorded; now the record comes first
// (with the tree hashed in the partial directory) and the directory
// after, so a kill leaves no .pml/deps/memory, or one that is recorded.
// The next pml add installs it again and succeeds.
func TestAnAddKilledBetweenItsInstallAndItsRecordLeavesNoUnrecordedInstall(t *testing.T) {
	needImage(t, nodeImage)
	const initial = `{"permissions": {"allow": ["filesystem:*"]}}` + "\n"
	ws := newWorkspace(t, initial)
	before := readFile(t, ws.path(".pml.json"))
	cmd := execPML(ws, "add", killedAddPackage, "--yes", "--allow")
	cmd.Dir = ws.Dir
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
	}()

	// The partial directory appears (pml created it under the lock and
	// let go of it): from now on the test holds the lock.
	var partial string
	waitSaw(t, "the install's partial directory", 2*time.Minute, func() (bool, string) {
		for _, p := range partials(t, ws) {
			if !strings.HasSuffix(p, ".lock") {
				partial = p
				return true, ""
			}
		}
		return false, tail(stderr.String())
	})
	lock, err := os.OpenFile(ws.path(".pml/deps/.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	// npm's install ends (its lockfile is written), pml checks it, and
	// either renames it into place (the old order: the directory shows
	// at once) or hashes it and waits for the lock to record it.
	waitSaw(t, "npm's install to end", 5*time.Minute, func() (bool, string) {
		_, err := os.Stat(ws.path(filepath.Join(".pml/deps", partial, "node_modules/.package-lock.json")))
		_, ferr := os.Stat(ws.path(".pml/deps/memory"))
		return err == nil || ferr == nil, tail(stderr.String())
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(ws.path(".pml/deps/memory")); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case err := <-done:
		killed = true
		t.Fatalf("pml add ended (%v) while the test held the lock of .pml/deps.json:\n%s", err, stderr.String())
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	killed = true
	_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	deps, _ := os.ReadFile(ws.path(".pml/deps.json"))
	if _, err := os.Stat(ws.path(".pml/deps/memory")); err == nil && !strings.Contains(string(deps), `"memory"`) {
		t.Fatalf("killed between its install and its record, pml add left .pml/deps/memory unrecorded; .pml/deps.json:\n%s\nstderr:\n%s", deps, tail(stderr.String()))
	}
	if after := readFile(t, ws.path(".pml.json")); after != before {
		t.Fatalf("the killed add changed .pml.json:\n%s", after)
	}
	code, stdout, serr := runPML(t, ws, "add", killedAddPackage, "--yes", "--allow")
	if code != 0 {
		t.Fatalf("the add after the kill: exit %d\n%s\n%s", code, stdout, serr)
	}
	if _, err := os.Stat(ws.path(".pml/deps/memory/node_modules")); err != nil {
		t.Errorf("after the second add: %v", err)
	}
	if deps := readFile(t, ws.path(".pml/deps.json")); !strings.Contains(deps, `"memory"`) {
		t.Errorf("after the second add, .pml/deps.json lacks memory:\n%s", deps)
	}
	if left := partials(t, ws); len(left) != 0 {
		t.Errorf("partial installs left after the second add: %v", left)
	}
	code, stdout, serr = runPML(t, ws, "tools", "--format", "json")
	if code != 0 || !strings.Contains(stdout, `"name": "memory:read_graph"`) {
		t.Errorf("pml tools after the second add lacks memory:read_graph: exit %d\n%s\n%s", code, stdout, serr)
	}
}
