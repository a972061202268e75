//go:build unix

package toolbox

import "golang.org/x/sys/unix"

// checkWritable asks the kernel whether this process may write p (as an
// in-place write would), whatever the directory allows.
func checkWritable(p string) error { return unix.Access(p, unix.W_OK) }
