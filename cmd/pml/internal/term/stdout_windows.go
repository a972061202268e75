package term

import (
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// ReserveStdout keeps the real stdout for the protocol and points the
// process's standard output handle (and os.Stdout) at stderr, so that
// nothing else — a stray print, a library's output — can ever corrupt
// the JSON-RPC stream.
func ReserveStdout() (*os.File, error) {
	out := os.Stdout
	if err := windows.SetStdHandle(windows.STD_OUTPUT_HANDLE, windows.Handle(os.Stderr.Fd())); err != nil {
		return nil, fmt.Errorf("redirecting stdout to stderr: %w", err)
	}
	os.Stdout = os.Stderr
	return out, nil
}
