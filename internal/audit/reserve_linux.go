package audit

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// reserve allocates n bytes past the end of f without changing its size
// (fallocate with FALLOC_FL_KEEP_SIZE): the entries written after it go
// into blocks that are already the file's, so a disk that is full by then
// still takes them. The blocks stay the file's (at most n bytes more on
// disk than its size). A file system without fallocate gets the check of
// free space instead, which keeps nothing aside.
func reserve(f *os.File, n int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	// Already reserved (by this call's predecessors, or another pml on
	// the workspace): half the reserve still free past the end. The
	// fallocate costs tens of microseconds on ext4 and the check nothing,
	// so it runs about once per n/2 bytes of entries. The allocated size
	// is read, not remembered: a log truncated or replaced has lost its
	// reserve.
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks*512 >= fi.Size()+n/2 {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		ferr = fallocate(fd, fi.Size(), n)
		if errors.Is(ferr, unix.ENOSPC) && n > MinRoom {
			// A full disk: what the earlier calls reserved may still
			// hold the next entries (allocating blocks the file already
			// has succeeds).
			ferr = fallocate(fd, fi.Size(), MinRoom)
		}
	}); err != nil {
		return err
	}
	if errors.Is(ferr, unix.EOPNOTSUPP) || errors.Is(ferr, unix.ENOSYS) {
		return room(f.Name(), n)
	}
	if ferr != nil {
		return &os.PathError{Op: "reserve", Path: f.Name(), Err: ferr}
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
