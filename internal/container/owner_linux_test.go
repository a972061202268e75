//go:build linux

package container

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// A pml that exited but was not reaped by its client (a zombie) owns
// nothing: its /proc entry and start time stay until it is reaped.
func TestAZombieOwnerIsNotAlive(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	owner := func(cmd *exec.Cmd) Owner {
		start, err := processStart(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		return Owner{PID: cmd.Process.Pid, Start: start}
	}
	running := exec.Command("sleep", "30")
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = running.Process.Kill(); _ = running.Wait() }()
	if !owner(running).Alive() {
		t.Error("a running process must count as the owner")
	}
	exited := exec.Command("true")
	if err := exited.Start(); err != nil {
		t.Fatal(err)
	}
	o := owner(exited)
	// Not waited for: it stays a zombie until Wait below.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, state, err := processStat(o.PID); err == nil && state == 'Z' {
			break
		} else if time.Now().After(end) {
			t.Fatalf("the child did not become a zombie: state %q, %v", state, err)
		}
	}
	if o.Alive() {
		t.Error("a zombie must not count as the owner")
	}
	_ = exited.Wait()
	if o.Alive() {
		t.Error("a reaped process must not count as the owner")
	}
}
