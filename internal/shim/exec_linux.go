//go:build linux

package shim

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// Exec connects to the socket at path, puts the connection on stdin and
// stdout, and replaces this process with argv (looked up in $PATH as
// Docker does); stderr and the environment are passed on untouched. It
// returns only when it fails: a *NoConnectionError before pml was
// reached, else the reason argv could not be run.
func Exec(path string, argv []string) error {
	if len(argv) == 0 {
		return errors.New("no command to run")
	}
	// The socket is made with raw system calls, not the net package: it
	// must stay a plain blocking descriptor for the program that inherits
	// it (many read stdin with blocking reads and fail on EAGAIN).
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return &NoConnectionError{Err: err}
	}
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		syscall.Close(fd)
		return &NoConnectionError{Err: err}
	}
	prog, err := exec.LookPath(argv[0])
	if errors.Is(err, exec.ErrDot) {
		// Docker runs a command found through a relative $PATH entry;
		// so does the shim.
		err = nil
	}
	if err != nil {
		syscall.Close(fd)
		return fmt.Errorf("cannot run the server's command: %w", err)
	}
	// Dup3 without O_CLOEXEC: 0 and 1 survive the exec; the original
	// (close-on-exec) descriptor does not.
	for _, target := range []int{0, 1} {
		if err := syscall.Dup3(fd, target, 0); err != nil {
			syscall.Close(fd)
			return fmt.Errorf("putting pml's socket on file descriptor %d: %w", target, err)
		}
	}
	syscall.Close(fd)
	err = syscall.Exec(prog, argv, os.Environ())
	return fmt.Errorf("cannot run the server's command %s: %w", prog, err)
}
