package extramount

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openNoLinks opens p (a directory or a file, not read: O_PATH) with
// RESOLVE_NO_SYMLINKS, so that the kernel refuses a link anywhere on the
// way; a kernel before 5.6 has no openat2 and gets openWalk.
func openNoLinks(p string) (*os.File, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM):
		// No openat2 (or a seccomp filter that refuses it).
		return openWalk(p)
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("%s: %w", p, errLinkInPath)
	case err != nil:
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}
