//go:build linux

package main

import (
	"syscall"
	"unsafe"
)

// termWidth is the terminal's column count (0 when unknown). Progress lines
// are cut to it: a wrapped line would break the in-place redraw.
func termWidth(fd uintptr) int {
	var ws struct{ Row, Col, X, Y uint16 }
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws))); e != 0 {
		return 0
	}
	return int(ws.Col)
}
