//go:build linux

// Package term is what pml needs of the terminal and of its standard
// streams, one file per platform where the system calls differ: the
// terminal's width, typing a secret unseen, and stdout kept for the
// protocol alone.
package term

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HideInput turns off echo on the terminal fd so that a typed secret is
// not shown, keeping line editing, Ctrl-C and the echo of the final
// newline. It returns the function that restores the terminal. The
// standard library is enough for this on Linux; pml adds no terminal
// dependency for one prompt.
func HideInput(fd int) (restore func(), err error) {
	var old syscall.Termios
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCGETS, uintptr(unsafe.Pointer(&old))); e != 0 {
		return nil, e
	}
	quiet := old
	quiet.Lflag &^= syscall.ECHO
	quiet.Lflag |= syscall.ICANON | syscall.ISIG | syscall.ECHONL
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCSETS, uintptr(unsafe.Pointer(&quiet))); e != 0 {
		return nil, e
	}
	return func() {
		_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCSETS, uintptr(unsafe.Pointer(&old)))
	}, nil
}

// Width is the terminal's column count (0 when unknown). Progress lines
// are cut to it: a wrapped line would break the in-place redraw.
func Width(fd uintptr) int {
	var ws struct{ Row, Col, X, Y uint16 }
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws))); e != 0 {
		return 0
	}
	return int(ws.Col)
}

// dupOnto makes newfd a copy of oldfd. dup3, not dup2: linux/arm64 has
// no dup2 system call.
func dupOnto(oldfd, newfd int) error { return unix.Dup3(oldfd, newfd, 0) }
