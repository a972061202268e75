//go:build windows

package supervise

import (
	"os"
	"os/exec"
)

// The supervisor only ever runs inside a Linux container; these keep the
// package building for pml's Windows binary.
func setGroup(*exec.Cmd) {}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

func signalOf(*os.ProcessState) (int, bool) { return 0, false }
