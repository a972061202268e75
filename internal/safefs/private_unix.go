//go:build unix

package safefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/pml-dev/pml/internal/termsafe"
)

// ErrNotPrivate: pml's own state is owned or writable by someone else.
var ErrNotPrivate = errors.New("not private to the user")

// Private checks pml's own state directory dir and the files names in it
// that exist (the trust records, the record of projects, their locks)
// before pml reads or writes them. Trust records that another local user
// can change are that user's grants, honoured as the person's own; pml
// often runs as root, so a store in a directory someone else owns, a
// group- or world-writable one, or one reached through a symbolic link
// pml did not make, is refused rather than used. Ancestors of dir (the
// home, ~/.local, XDG_STATE_HOME) are checked for ownership only: they may
// be links (a home on another disk) and group-writable (umask 002 with
// user private groups), which only their owner can exploit.
//
// what names the state for the message ("pml's trust records").
func Private(dir, what string, names ...string) error {
	euid := os.Geteuid()
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return privateAncestors(dir, what, euid)
	}
	if err != nil {
		return fmt.Errorf("cannot check %s in %s: %w", what, q(dir), err)
	}
	if err := privateOne(dir, st, what, euid, true); err != nil {
		return err
	}
	if err := privateAncestors(dir, what, euid); err != nil {
		return err
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		st, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("cannot check %s %s: %w", what, q(p), err)
		}
		if err := privateOne(p, st, what, euid, false); err != nil {
			return err
		}
	}
	return nil
}

func q(p string) string { return termsafe.Quote(p, 1024) }

func privateOne(p string, st fs.FileInfo, what string, euid int, dir bool) error {
	kind := "file"
	if dir {
		kind = "directory"
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(p)
		return &Error{Path: q(p), Problem: "is a symbolic link (to " + q(target) + "), and holds " + what,
			Fix: "pml does not follow links to its own state, which another user could point elsewhere: replace the link with a real " + kind + " of yours (move the target in its place), or set XDG_STATE_HOME to the real place",
			Err: ErrNotPrivate}
	}
	if dir != st.IsDir() {
		if dir {
			return notDirError(q(p), st.Mode())
		}
		return notRegularError(q(p), st.Mode())
	}
	if uid, ok := owner(st); ok && uid != euid {
		return &Error{Path: q(p), Problem: fmt.Sprintf("holds %s but is owned by uid %d, not by you (uid %d): whoever owns it can change what pml honours as yours", what, uid, euid),
			Fix: fmt.Sprintf("if it is yours, run `chown -R %d %s`; otherwise set XDG_STATE_HOME to a directory of your own", euid, q(p)),
			Err: ErrNotPrivate}
	}
	if st.Mode().Perm()&0o022 != 0 {
		return &Error{Path: q(p), Problem: fmt.Sprintf("holds %s but is writable by group or others (mode %04o): they can change what pml honours as yours", what, st.Mode().Perm()),
			Fix: "run `chmod go-w " + q(p) + "` (pml makes it 0700, its files 0600)",
			Err: ErrNotPrivate}
	}
	return nil
}

// privateAncestors refuses a directory above dir owned by another user
// than the person or root (that user could rename dir and put their own
// in its place), and a root-owned one anyone can write without the sticky
// bit. The walk is over the real path: links resolved.
func privateAncestors(dir, what string, euid int) error {
	p := filepath.Dir(dir)
	for {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
			break
		}
		up := filepath.Dir(p)
		if up == p {
			return nil
		}
		p = up
	}
	for {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("cannot check %s in %s: %w", what, q(p), err)
		}
		uid, ok := owner(st)
		if ok && uid != euid && uid != 0 {
			return &Error{Path: q(p), Problem: fmt.Sprintf("is above %s (in %s) but is owned by uid %d, not by you (uid %d) or root: its owner can put other records in their place", what, q(dir), uid, euid),
				Fix: "set XDG_STATE_HOME to a directory of your own", Err: ErrNotPrivate}
		}
		if ok && uid == 0 && euid != 0 && st.Mode().Perm()&0o002 != 0 && st.Mode()&fs.ModeSticky == 0 {
			return &Error{Path: q(p), Problem: fmt.Sprintf("is above %s (in %s) and anyone can write it (mode %04o, no sticky bit): anyone can put other records in their place", what, q(dir), st.Mode().Perm()),
				Fix: "set XDG_STATE_HOME to a directory of your own", Err: ErrNotPrivate}
		}
		up := filepath.Dir(p)
		if up == p {
			return nil
		}
		p = up
	}
}

func owner(st fs.FileInfo) (int, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(s.Uid), true
}
