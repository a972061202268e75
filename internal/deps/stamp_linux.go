package deps

import (
	"io/fs"
	"syscall"
	"time"
)

// stamp is what a file's stat says of its identity and last change.
type stamp struct {
	dev, ino     uint64
	size         int64
	mode         uint32
	mtime, ctime syscall.Timespec
}

func stampOf(fi fs.FileInfo) (stamp, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{}, false
	}
	return stamp{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mode: st.Mode, mtime: st.Mtim, ctime: st.Ctim}, true
}

// settled reports whether the file last changed settleTime or more
// before now.
func (k stamp) settled(now time.Time) bool {
	m, c := time.Unix(k.mtime.Unix()), time.Unix(k.ctime.Unix())
	return now.Sub(m) >= settleTime && now.Sub(c) >= settleTime
}
