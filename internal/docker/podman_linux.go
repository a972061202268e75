package docker

import (
	"os"
	"strings"
	"syscall"
)

// localRootless tells, without asking the engine, whether a Podman
// listening on a unix socket of this machine runs rootless: its service
// creates the socket as the user it runs as. ok is false where the socket
// cannot say (not a local socket).
func localRootless(daemonHost string) (rootless, ok bool) {
	path, isUnix := strings.CutPrefix(daemonHost, "unix://")
	if !isUnix {
		return false, false
	}
	fi, err := os.Stat(path)
	if err != nil {
		return false, false
	}
	st, isStat := fi.Sys().(*syscall.Stat_t)
	if !isStat {
		return false, false
	}
	return st.Uid != 0, true
}

// hostCgroupVersion is this machine's cgroup version: "2" when
// /sys/fs/cgroup is the unified hierarchy, "1" otherwise.
func hostCgroupVersion() (string, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &st); err != nil {
		return "", false
	}
	const cgroup2Magic = 0x63677270 // CGROUP2_SUPER_MAGIC, linux/magic.h
	if st.Type == cgroup2Magic {
		return "2", true
	}
	return "1", true
}
