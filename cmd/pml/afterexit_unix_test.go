//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/container"
)

// The watcher of pml's exit removes a pml's containers only once it is
// dead: a zombie its client has not collected counts as dead, a running
// process never does.
func TestOwnerGoneCountsAZombieAndNotTheLiving(t *testing.T) {
	if ownerGone(container.Self(), 50*time.Millisecond) {
		t.Fatal("a running process was taken for dead")
	}
	cmd := exec.Command("sleep", "0.2")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = cmd.Wait() }()
	o := container.Owner{PID: cmd.Process.Pid}
	o.Start = readStart(t, o.PID)
	if !o.Alive() {
		t.Fatal("the child is not seen as alive while it runs")
	}
	if !ownerGone(o, 5*time.Second) {
		t.Fatal("an exited process its parent has not collected (a zombie) was taken for alive")
	}
}

func readStart(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	st := string(b)
	f := strings.Fields(st[strings.LastIndexByte(st, ')')+1:])
	n, err := strconv.ParseUint(f[22-3], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
