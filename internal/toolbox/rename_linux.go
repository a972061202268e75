package toolbox

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// renameat2 is unix.Renameat2, replaceable by tests that play an old
// kernel.
var renameat2 = unix.Renameat2

// renameNoReplace moves src to dst and fails with EEXIST when dst exists,
// atomically: a destination created between a check and the move (by a
// process racing the tool) is never overwritten. Where the kernel or the
// filesystem lacks RENAME_NOREPLACE (EINVAL, ENOSYS), a file is moved by
// link and unlink (link fails when dst exists); a directory is then
// refused rather than moved with a replace.
func renameNoReplace(src, dst string) error {
	err := renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: err}
	}
	fi, lerr := os.Lstat(src)
	if lerr != nil {
		return lerr
	}
	if fi.IsDir() {
		return fmt.Errorf("cannot move the directory %s: this kernel or filesystem cannot rename without replacing (no RENAME_NOREPLACE), and a replace could overwrite a destination that appears meanwhile", src)
	}
	// link(2) does not follow a symlink src: the link itself is moved.
	if err := os.Link(src, dst); err != nil {
		return err
	}
	return os.Remove(src)
}
