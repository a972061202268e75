//go:build unix

package term

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ReserveStdout keeps the real stdout for the protocol and points file
// descriptor 1 (and os.Stdout) at stderr, so that nothing else — a stray
// print, a library's output — can ever corrupt the JSON-RPC stream.
func ReserveStdout() (*os.File, error) {
	fd, err := unix.Dup(1)
	if err != nil {
		return nil, fmt.Errorf("reserving stdout for the protocol: %w", err)
	}
	// Not passed on to what pml starts (the watcher of its exit, an ssh
	// to a remote engine): a client waits for the end of pml's stdout,
	// which would then come only when they exit too.
	unix.CloseOnExec(fd)
	if err := dupOnto(2, 1); err != nil {
		return nil, fmt.Errorf("redirecting stdout to stderr: %w", err)
	}
	os.Stdout = os.Stderr
	return os.NewFile(uintptr(fd), "mcp-stdout"), nil
}
