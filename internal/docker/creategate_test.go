//go:build unix

package docker

import (
	"path/filepath"
	"testing"
	"time"
)

// Two gates on one lock file stand for two pml processes on one engine:
// while one is inside, the other waits.
func TestTheCreateGateHoldsAcrossProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".pml-create.lock")
	a, b := &createGate{path: path}, &createGate{path: path}
	leaveA := a.enter()
	entered := make(chan func())
	go func() { entered <- b.enter() }()
	select {
	case <-entered:
		t.Fatal("a second process entered the gate while the first was inside")
	case <-time.After(200 * time.Millisecond):
	}
	leaveA()
	select {
	case leaveB := <-entered:
		leaveB()
	case <-time.After(10 * time.Second):
		t.Fatal("the second process never entered after the first left")
	}
}

func TestTheCreateLockLivesBesideAUnixSocket(t *testing.T) {
	if got := createLockPath("unix:///run/user/1000/podman/podman.sock"); got != "/run/user/1000/podman/.pml-create.lock" {
		t.Errorf("lock path = %q", got)
	}
	if got := createLockPath("tcp://127.0.0.1:2375"); got == "" || filepath.Base(filepath.Dir(got)) != "pml" {
		t.Errorf("lock path for tcp = %q", got)
	}
}
