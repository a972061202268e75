//go:build unix

package sandbox

import (
	"os"
	"syscall"

	"github.com/pml-dev/pml/internal/container"
)

// FileOwner is the uid and gid that own path.
func FileOwner(path string) (container.Ident, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return container.Ident{}, false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return container.Ident{}, false
	}
	return container.Ident{UID: int(sys.Uid), GID: int(sys.Gid)}, true
}
