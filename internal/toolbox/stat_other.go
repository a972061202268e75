//go:build !linux && !darwin

package toolbox

import (
	"io/fs"
	"time"
)

// accessTime: not read on these hosts (the agent runs in Linux
// containers); get_file_info leaves "accessed" empty.
func accessTime(fs.FileInfo) (time.Time, bool) { return time.Time{}, false }
