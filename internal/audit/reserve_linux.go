package audit

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/pml-dev/pml/internal/rawio"
)

// reserve makes sure the blocks past the end of f hold need bytes, and
// need+extra when the disk has them (fallocate with FALLOC_FL_KEEP_SIZE,
// which does not change the file's size): the entries written after it go
// into blocks that are already the file's, so a disk that is full by then
// still takes them. The blocks stay the file's (at most need+extra bytes
// more on disk than its size). A file system without fallocate gets the
// check of free space instead, which keeps nothing aside.
func reserve(f *os.File, need, extra int64) error {
	size, blocks, err := statOf(f)
	if err != nil {
		return err
	}
	// Reserved already, with room to spare (by earlier calls, or another
	// pml on the workspace): no system call. The allocated size is read,
	// not remembered: a log truncated or replaced has lost its reserve.
	// It counts every block of the file, so the spare (half of Reserve)
	// also covers the few an extent tree may take; with less to spare
	// fallocate itself says whether need fits.
	if blocks*512 >= size+need+Reserve/2 {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		ferr = unix.ENOSPC
		if extra > 0 {
			ferr = fallocate(fd, size, need+extra)
		}
		if errors.Is(ferr, unix.ENOSPC) {
			// A full disk: the blocks reserved earlier may still hold
			// need (allocating blocks the file already has succeeds,
			// and asks for nothing more).
			ferr = fallocate(fd, size, need)
		}
	}); err != nil {
		return err
	}
	if errors.Is(ferr, unix.EOPNOTSUPP) || errors.Is(ferr, unix.ENOSYS) {
		return room(f.Name(), need+extra)
	}
	if ferr != nil {
		return &os.PathError{Op: "reserve", Path: f.Name(), Err: ferr}
	}
	return nil
}

// statOf is f's size and the 512-byte blocks allocated to it, from a
// fstat into a value of this frame (f.Stat allocates its answer, on
// every call of the fast path).
func statOf(f *os.File) (size, blocks int64, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var st unix.Stat_t
	var serr error
	// A raw fstat: this runs on every call (internal/rawio).
	if err := rc.Control(func(fd uintptr) { serr = rawio.Fstat(fd, &st) }); err != nil {
		return 0, 0, err
	}
	if serr != nil {
		return 0, 0, &os.PathError{Op: "fstat", Path: f.Name(), Err: serr}
	}
	return st.Size, st.Blocks, nil
}

// writeAll writes line to f, the log (a regular file), with raw system
// calls: this runs on every call (internal/rawio).
func writeAll(f *os.File, line []byte) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	if err := rc.Control(func(fd uintptr) { _, werr = rawio.WriteFile(fd, line) }); err != nil {
		return err
	}
	if werr != nil {
		return &os.PathError{Op: "write", Path: f.Name(), Err: werr}
	}
	return nil
}

func fallocate(fd uintptr, off, n int64) error {
	for {
		err := unix.Fallocate(int(fd), unix.FALLOC_FL_KEEP_SIZE, off, n)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// probe checks that dir (or the file) at p is writable and that its file
// system has n bytes free.
func probe(p string, n int64) error {
	if err := unix.Access(p, unix.W_OK); err != nil {
		return &os.PathError{Op: "access", Path: p, Err: err}
	}
	return room(p, n)
}

// room fails with ENOSPC when the file system holding p has less than n
// bytes free for this user.
func room(p string, n int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return &os.PathError{Op: "statfs", Path: p, Err: err}
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if os.Geteuid() == 0 {
		// root may use the blocks kept for it too.
		free = int64(st.Bfree) * int64(st.Bsize)
	}
	if free < n {
		return &os.PathError{Op: "statfs", Path: p, Err: unix.ENOSPC}
	}
	return nil
}
