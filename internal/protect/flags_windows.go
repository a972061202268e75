//go:build windows

package protect

// Windows has neither flag; pml's containers (and so this guard) run
// against a Linux daemon's filesystem.
const (
	oNoFollow = 0
	oNonBlock = 0
)
