//go:build unix

package extramount

import (
	"io/fs"
	"syscall"
)

// identity is the device and inode of what fi describes.
func identity(fi fs.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino) //nolint:unconvert // Dev is 32-bit on some platforms
	}
	return 0, 0
}
