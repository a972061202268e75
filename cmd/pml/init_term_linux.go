//go:build linux

package main

import (
	"syscall"
	"unsafe"
)

// hideInput turns off echo on the terminal fd so that a typed secret is
// not shown, keeping line editing, Ctrl-C and the echo of the final
// newline. It returns the function that restores the terminal. The
// standard library is enough for this on Linux; pml adds no terminal
// dependency for one prompt.
func hideInput(fd int) (restore func(), err error) {
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
