//go:build linux

package rawio

import (
	"errors"
	"io"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FD is a non-blocking descriptor on Go's poller, read and written with
// raw system calls; waiting for it is still the poller's (deadlines and
// Close included).
type FD struct {
	rc syscall.RawConn
	// file: the *os.File it is of, nil for a socket; its errors are made
	// as the file's own would be (os.ErrClosed after Close, a
	// *os.PathError).
	file *os.File
}

// Of is c's descriptor as an FD, or nil when it is not in non-blocking
// mode (a raw read of a blocking descriptor would hold the thread and
// its processor) or has no raw side. A nil FD is never used: callers
// keep c.
func Of(c syscall.Conn) *FD {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	nonblocking := false
	if err := rc.Control(func(fd uintptr) {
		fl, _, e := unix.RawSyscall(unix.SYS_FCNTL, fd, unix.F_GETFL, 0)
		nonblocking = e == 0 && fl&unix.O_NONBLOCK != 0
	}); err != nil || !nonblocking {
		return nil
	}
	f, _ := c.(*os.File)
	return &FD{rc: rc, file: f}
}

// waitErr is err, of the poller's wait for op, as the descriptor's own
// read or write would have said it.
func (f *FD) waitErr(op string, err error) error {
	if f.file == nil {
		return err
	}
	// The poller's "use of closed file" is os.ErrClosed to a file's
	// callers; a closed descriptor refuses Control too (a deadline
	// does not).
	if !errors.Is(err, os.ErrDeadlineExceeded) && f.rc.Control(func(uintptr) {}) != nil {
		err = os.ErrClosed
	}
	return &os.PathError{Op: op, Path: f.file.Name(), Err: err}
}

// callErr is errno of op as the descriptor's own read or write would
// have said it.
func (f *FD) callErr(op string, errno syscall.Errno) error {
	if f.file == nil {
		return os.NewSyscallError(op, errno)
	}
	return &os.PathError{Op: op, Path: f.file.Name(), Err: errno}
}

// Read is one read(2) of at most len(p) bytes, waiting on the poller
// while there is nothing to read; io.EOF at the end of the stream.
func (f *FD) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := f.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false
			}
			n, errno = int(r), e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, f.waitErr("read", err)
	case errno != 0:
		return 0, f.callErr("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p, waiting on the poller while the descriptor is
// full; it returns fewer bytes only with an error.
func (f *FD) Write(p []byte) (int, error) {
	n, errno := 0, syscall.Errno(0)
	err := f.rc.Write(func(fd uintptr) bool {
		errno = writeFrom(fd, p, &n)
		return errno != unix.EAGAIN
	})
	switch {
	case err != nil:
		return n, f.waitErr("write", err)
	case errno != 0:
		return n, f.callErr("write", errno)
	}
	return n, nil
}

// Fstat is fstat(2) of fd.
func Fstat(fd uintptr, st *unix.Stat_t) error {
	if _, _, e := unix.RawSyscall(unix.SYS_FSTAT, fd, uintptr(unsafe.Pointer(st)), 0); e != 0 {
		return e
	}
	return nil
}

// WriteFile writes all of p to fd, a regular file (which never answers
// EAGAIN: a write waits on no other process, only on the page cache).
func WriteFile(fd uintptr, p []byte) (int, error) {
	n := 0
	if e := writeFrom(fd, p, &n); e != 0 {
		return n, e
	}
	return n, nil
}

// writeFrom writes p[*n:] to fd, advancing *n, until all of it is
// written (0) or a write fails with something other than EINTR (EAGAIN
// included: the caller waits, or not).
func writeFrom(fd uintptr, p []byte, n *int) syscall.Errno {
	for *n < len(p) {
		r, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[*n])), uintptr(len(p)-*n))
		switch e {
		case 0:
			*n += int(r)
		case unix.EINTR:
		default:
			return e
		}
	}
	return 0
}

// PollNow is epoll_wait(2) on ep with no timeout: the events ready now.
func PollNow(ep int, events []unix.EpollEvent) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	for {
		r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(ep), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(r), nil
	}
}
