//go:build unix

package docker

import (
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// socketGroup is the name of the group that owns the socket file at path.
func socketGroup(path string) (string, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return "", false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	gid := strconv.FormatUint(uint64(sys.Gid), 10)
	if g, err := user.LookupGroupId(gid); err == nil {
		return g.Name, true
	}
	return gid, true
}
