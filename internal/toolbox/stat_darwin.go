package toolbox

import (
	"io/fs"
	"syscall"
	"time"
)

// accessTime is a file's last access time: Darwin names the field
// Atimespec.
func accessTime(st fs.FileInfo) (time.Time, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(sys.Atimespec.Unix()), true
}
