//go:build unix

package toolbox

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// checkWritable asks the kernel whether this process may write p (as an
// in-place write would), whatever the directory allows.
func checkWritable(p string) error { return unix.Access(p, unix.W_OK) }

// ownerNote says, for a write the file system refused at p, which uid the
// tool runs as and who owns p (or, when p does not exist, its directory),
// so that the person sees why: a workspace owned by another user.
func ownerNote(p string) string {
	var st unix.Stat_t
	target := p
	if unix.Lstat(p, &st) != nil {
		target = filepath.Dir(p)
		if unix.Stat(target, &st) != nil {
			return ""
		}
	}
	return fmt.Sprintf(" (tools run as uid %d, gid %d; %s is owned by uid %d, gid %d, mode %04o; set sandbox.user in .pml.json to the owner's uid:gid, or run pml as the owner)",
		unix.Getuid(), unix.Getgid(), target, st.Uid, st.Gid, st.Mode&0o7777)
}
