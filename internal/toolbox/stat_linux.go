package toolbox

import (
	"io/fs"
	"syscall"
	"time"
)

// accessTime is a file's last access time (the agent runs in Linux
// containers; other hosts build this package for its tool definitions).
func accessTime(st fs.FileInfo) (time.Time, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(sys.Atim.Unix()), true
}
