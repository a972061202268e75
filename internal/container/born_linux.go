package container

import "golang.org/x/sys/unix"

// bornOf is when path was made, in ns since the epoch, or 0 where the
// file system keeps no birth time (statx without STATX_BTIME).
func bornOf(path string) int64 {
	var st unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_BTIME, &st) != nil || st.Mask&unix.STATX_BTIME == 0 {
		return 0
	}
	return st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
}
