//go:build linux

package safefs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

var (
	// noOpenat2 is set once the kernel answered ENOSYS (before 5.6, or a
	// seccomp profile that hides it): from then on the walk is used.
	noOpenat2 atomic.Bool
	// forceWalk makes tests exercise the walk on kernels with openat2.
	forceWalk atomic.Bool
)

// dirFlags opens a directory component: never through a link, never
// anything but a directory.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

func openRoot(root string) (int, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	return fd, nil
}

// openDirBeneath opens the directory r beneath dirfd, refusing a symbolic
// link at every component and any way out of dirfd.
func openDirBeneath(dirfd int, r string) (int, error) {
	if !forceWalk.Load() && !noOpenat2.Load() {
		how := &unix.OpenHow{Flags: uint64(dirFlags), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		for i := 0; ; i++ {
			fd, err := unix.Openat2(dirfd, r, how)
			switch {
			case err == nil:
				return fd, nil
			case (err == unix.EAGAIN || err == unix.EINTR) && i < 8:
				// A concurrent rename in the tree: the kernel asks to retry.
				continue
			case err == unix.ENOSYS:
				noOpenat2.Store(true)
			default:
				return -1, err
			}
			break
		}
	}
	// The walk: each component opened relative to the previous one with
	// O_NOFOLLOW|O_DIRECTORY. r is clean and has no "..", so this never
	// leaves dirfd either.
	cur := dirfd
	for _, c := range strings.Split(r, string(filepath.Separator)) {
		if c == "" || c == "." {
			continue
		}
		next, err := unix.Openat(cur, c, dirFlags, 0)
		if cur != dirfd {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = next
	}
	if cur == dirfd {
		return unix.Dup(dirfd)
	}
	return cur, nil
}

// openParent opens the directory holding r and returns it with r's last
// component.
func openParent(root, r, show string) (int, string, error) {
	rootfd, err := openRoot(root)
	if err != nil {
		return -1, "", err
	}
	dir, leaf := filepath.Dir(r), filepath.Base(r)
	if dir == "." {
		return rootfd, leaf, nil
	}
	defer unix.Close(rootfd)
	fd, err := openDirBeneath(rootfd, dir)
	if err != nil {
		return -1, "", explain(root, r, show, err, false)
	}
	return fd, leaf, nil
}

func modeOf(m uint32) fs.FileMode {
	var out fs.FileMode
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		out = fs.ModeDir
	case unix.S_IFLNK:
		out = fs.ModeSymlink
	case unix.S_IFIFO:
		out = fs.ModeNamedPipe
	case unix.S_IFSOCK:
		out = fs.ModeSocket
	case unix.S_IFCHR:
		out = fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		out = fs.ModeDevice
	}
	return out | fs.FileMode(m&0o777)
}

// refuseLeaf checks what is at leaf (not following it) before it is
// opened, so that a device or FIFO is not even opened. ok is false when
// nothing is there.
func refuseLeaf(pfd int, leaf, show string) (exists bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, leaf, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return false, nil
		}
		return false, &fs.PathError{Op: "lstat", Path: show, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return true, nil
	case unix.S_IFLNK:
		return true, symlinkError(show, readlinkat(pfd, leaf), false)
	}
	return true, notRegularError(show, modeOf(st.Mode))
}

func readlinkat(dirfd int, name string) string {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// checkOpened fstats what was opened: a regular file (with one link when
// it is written), O_NONBLOCK cleared again.
func checkOpened(fd int, show string, write bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "fstat", Path: show, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return notRegularError(show, modeOf(st.Mode))
	}
	if write && st.Nlink > 1 {
		return &Error{Path: show, Problem: "has other hard links", Fix: "pml does not append to a file that is also elsewhere: remove it (pml creates a new one)", Err: ErrHardLinked}
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	if err != nil {
		return &fs.PathError{Op: "fcntl", Path: show, Err: err}
	}
	return nil
}

func openErr(pfd int, leaf, show, op string, err error) error {
	switch err {
	case unix.ELOOP:
		return symlinkError(show, readlinkat(pfd, leaf), false)
	case unix.ENXIO:
		// O_WRONLY|O_NONBLOCK on a FIFO nobody reads.
		return notRegularError(show, fs.ModeNamedPipe)
	}
	return &fs.PathError{Op: op, Path: show, Err: err}
}

func openRead(root, r, show string) (*os.File, error) {
	pfd, leaf, err := openParent(root, r, show)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	exists, err := refuseLeaf(pfd, leaf, show)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, &fs.PathError{Op: "open", Path: show, Err: unix.ENOENT}
	}
	fd, err := unix.Openat(pfd, leaf, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, openErr(pfd, leaf, show, "open", err)
	}
	if err := checkOpened(fd, show, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), show), nil
}

func openWrite(root, r, show string, flag int, perm fs.FileMode) (*os.File, error) {
	pfd, leaf, err := openParent(root, r, show)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	if _, err := refuseLeaf(pfd, leaf, show); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(pfd, leaf, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, uint32(perm.Perm()))
	if err != nil {
		return nil, openErr(pfd, leaf, show, "open", err)
	}
	if err := checkOpened(fd, show, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), show), nil
}

func writeAtomic(root, r, show string, data []byte, perm fs.FileMode, sync bool) error {
	pfd, leaf, err := openParent(root, r, show)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if _, err := refuseLeaf(pfd, leaf, show); err != nil {
		return err
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + leaf + ".tmp-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &fs.PathError{Op: "create", Path: filepath.Join(filepath.Dir(show), tmp), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(filepath.Dir(show), tmp))
	ok := false
	defer func() {
		if !ok {
			_ = unix.Unlinkat(pfd, tmp, 0)
		}
	}()
	if err := fillTemp(f, data, perm, show, sync); err != nil {
		return err
	}
	if err := unix.Renameat(pfd, tmp, pfd, leaf); err != nil {
		return &fs.PathError{Op: "rename", Path: show, Err: err}
	}
	ok = true
	return nil
}

func mkdirAll(root, r, show string, perm fs.FileMode) error {
	cur, err := openRoot(root)
	if err != nil {
		return err
	}
	defer func() { unix.Close(cur) }()
	if r == "." {
		return nil
	}
	done := ""
	for _, c := range strings.Split(r, string(filepath.Separator)) {
		if c == "" || c == "." {
			continue
		}
		done = filepath.Join(done, c)
		if err := unix.Mkdirat(cur, c, uint32(perm.Perm())); err != nil && err != unix.EEXIST {
			return &fs.PathError{Op: "mkdir", Path: filepath.Join(root, done), Err: err}
		}
		next, err := unix.Openat(cur, c, dirFlags, 0)
		if err != nil {
			return explain(root, done, filepath.Join(root, done), err, true)
		}
		unix.Close(cur)
		cur = next
	}
	return nil
}

func lstat(root, r, show string) (fs.FileInfo, error) {
	if r == "." {
		return os.Lstat(root)
	}
	pfd, leaf, err := openParent(root, r, show)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	// O_PATH|O_NOFOLLOW opens the entry itself, a link included, without
	// opening a device or a FIFO; fstat on it is lstat.
	fd, err := unix.Openat(pfd, leaf, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: show, Err: err}
	}
	f := os.NewFile(uintptr(fd), show)
	defer f.Close()
	return f.Stat()
}

func remove(root, r, show string) error {
	pfd, leaf, err := openParent(root, r, show)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	err = unix.Unlinkat(pfd, leaf, 0)
	if err == unix.EISDIR {
		err = unix.Unlinkat(pfd, leaf, unix.AT_REMOVEDIR)
	}
	if err != nil {
		return &fs.PathError{Op: "remove", Path: show, Err: err}
	}
	return nil
}

func removeAll(root, r, show string) error {
	pfd, leaf, err := openParent(root, r, show)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := removeAt(pfd, leaf, 0); err != nil {
		return &fs.PathError{Op: "remove", Path: show, Err: unwrapPathErr(err)}
	}
	return nil
}

// removeAt removes name in dirfd and, for a directory, everything in it,
// through descriptors only: a link anywhere is removed, never followed.
func removeAt(dirfd int, name string, depth int) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR || depth > 256 {
		return err
	}
	fd, err := unix.Openat(dirfd, name, dirFlags, 0)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), name)
	for {
		names, rerr := d.Readdirnames(512)
		for _, n := range names {
			if err := removeAt(fd, n, depth+1); err != nil {
				d.Close()
				return err
			}
		}
		if rerr != nil || len(names) == 0 {
			break
		}
	}
	d.Close()
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return err
	}
	return nil
}

func rename(root, ro, rn, showOld, showNew string) error {
	ofd, oleaf, err := openParent(root, ro, showOld)
	if err != nil {
		return err
	}
	defer unix.Close(ofd)
	nfd, nleaf, err := openParent(root, rn, showNew)
	if err != nil {
		return err
	}
	defer unix.Close(nfd)
	if err := unix.Renameat(ofd, oleaf, nfd, nleaf); err != nil {
		return &os.LinkError{Op: "rename", Old: showOld, New: showNew, Err: err}
	}
	return nil
}

func lchown(root, r, show string, uid, gid int) error {
	pfd, leaf, err := openParent(root, r, show)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Fchownat(pfd, leaf, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "chown", Path: show, Err: err}
	}
	return nil
}
