//go:build linux

package container_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	. "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
)

// A pml that exited and whose parent has not collected it (a zombie) is
// not alive: what it left is reaped (pml cleanup found it alive and left
// its containers until the parent's wait). A running process is alive.
func TestAZombieOwnerIsNotAlive(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting sleep: %v", err)
	}
	pid := cmd.Process.Pid
	owner := ownerOf(t, pid)
	if !owner.Alive() {
		t.Fatal("a running process is not alive")
	}
	rt := &containertest.Runtime{Managed: []Managed{{ID: "left", Labels: owner.Labels(), Running: true}}}
	if n, _ := Orphans(context.Background(), rt, Self()); n != 0 {
		t.Fatalf("the container of a running owner counts as an orphan (%d)", n)
	}
	_ = cmd.Process.Kill()
	// Not collected: the process stays a zombie until Wait.
	for deadline := time.Now().Add(10 * time.Second); state(t, pid) != "Z"; {
		if time.Now().After(deadline) {
			t.Fatalf("the killed process is %q, not a zombie", state(t, pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if owner.Alive() {
		t.Error("a zombie owner is alive")
	}
	if n, err := Reap(context.Background(), rt, Self()); err != nil || n != 1 {
		t.Errorf("reaped %d containers of a zombie owner (%v), want 1", n, err)
	}
	_ = cmd.Wait()
	if owner.Alive() {
		t.Error("a collected owner is alive")
	}
}

// ownerOf is the Owner of pid, as a pml of that pid labels its containers.
func ownerOf(t *testing.T, pid int) Owner {
	t.Helper()
	self := Self()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	var start uint64
	if _, err := fmt.Sscan(f[22-3], &start); err != nil {
		t.Fatal(err)
	}
	return Owner{PID: pid, Start: start, Host: self.Host, HostID: self.HostID}
}

func state(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone"
	}
	return strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))[0]
}
