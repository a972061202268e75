//go:build !linux

package safefs

// The portable fallback: every component is checked with Lstat before it
// is used, and what was opened is compared with what was checked
// (os.SameFile), so a link or a special file is refused. Unlike the Linux
// path a swap between the check and the use of a directory is not
// excluded; pml's own files on these hosts live under the user's own
// account, where Docker Desktop's file sharing is the container boundary.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// checkDirs refuses a link or a non-directory at every directory of r.
func checkDirs(root, r, show string) error {
	dir := filepath.Dir(r)
	if dir == "." {
		return nil
	}
	p := root
	for _, c := range strings.Split(dir, string(filepath.Separator)) {
		if c == "" || c == "." {
			continue
		}
		p = filepath.Join(p, c)
		if err := checkDir(p); err != nil {
			return err
		}
	}
	return nil
}

// checkDir refuses p unless it is a real directory (not a link to one).
func checkDir(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, _ := os.Readlink(p)
		return symlinkError(p, t, true)
	}
	if !fi.IsDir() {
		return notDirError(p, fi.Mode())
	}
	return nil
}

// checkLeaf returns what is at show (nil when nothing), refusing a link
// or anything but a regular file.
func checkLeaf(show string) (fs.FileInfo, error) {
	fi, err := os.Lstat(show)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, _ := os.Readlink(show)
		return nil, symlinkError(show, t, false)
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegularError(show, fi.Mode())
	}
	return fi, nil
}

func sameAfterOpen(f *os.File, before fs.FileInfo, show string) error {
	after, err := f.Stat()
	if err != nil {
		return err
	}
	if !after.Mode().IsRegular() {
		return notRegularError(show, after.Mode())
	}
	if before != nil && !os.SameFile(before, after) {
		return &Error{Path: show, Problem: "changed while pml opened it", Fix: "try again; if it keeps changing, something else is rewriting it", Err: ErrNotRegular}
	}
	return nil
}

func openRead(root, r, show string) (*os.File, error) {
	if err := checkDirs(root, r, show); err != nil {
		return nil, err
	}
	before, err := checkLeaf(show)
	if err != nil {
		return nil, err
	}
	if before == nil {
		return nil, &fs.PathError{Op: "open", Path: show, Err: fs.ErrNotExist}
	}
	f, err := os.Open(show)
	if err != nil {
		return nil, err
	}
	if err := sameAfterOpen(f, before, show); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func openWrite(root, r, show string, flag int, perm fs.FileMode) (*os.File, error) {
	if err := checkDirs(root, r, show); err != nil {
		return nil, err
	}
	before, err := checkLeaf(show)
	if err != nil {
		return nil, err
	}
	if before == nil {
		// Create it exclusively so that a link planted meanwhile is not
		// followed; a concurrent creator wins and is checked below.
		if f, err := os.OpenFile(show, flag|os.O_EXCL, perm); err == nil {
			return f, nil
		}
		if before, err = checkLeaf(show); err != nil || before == nil {
			return nil, &fs.PathError{Op: "open", Path: show, Err: fs.ErrExist}
		}
	}
	f, err := os.OpenFile(show, flag&^os.O_CREATE, perm)
	if err != nil {
		return nil, err
	}
	if err := sameAfterOpen(f, before, show); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func writeAtomic(root, r, show string, data []byte, perm fs.FileMode, sync bool) error {
	if err := checkDirs(root, r, show); err != nil {
		return err
	}
	if _, err := checkLeaf(show); err != nil {
		return err
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(show), "."+filepath.Base(show)+".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	if err := fillTemp(f, data, perm, show, sync); err != nil {
		return err
	}
	if err := os.Rename(tmp, show); err != nil {
		return err
	}
	ok = true
	return nil
}

func mkdirAll(root, r, show string, perm fs.FileMode) error {
	if r == "." {
		return nil
	}
	p := root
	for _, c := range strings.Split(r, string(filepath.Separator)) {
		if c == "" || c == "." {
			continue
		}
		p = filepath.Join(p, c)
		if err := os.Mkdir(p, perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := checkDir(p); err != nil {
			return err
		}
	}
	return nil
}

func lstat(root, r, show string) (fs.FileInfo, error) {
	if err := checkDirs(root, r, show); err != nil {
		return nil, err
	}
	return os.Lstat(show)
}

func remove(root, r, show string) error {
	if err := checkDirs(root, r, show); err != nil {
		return err
	}
	return os.Remove(show)
}

func removeAll(root, r, show string) error {
	if err := checkDirs(root, r, show); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	// os.RemoveAll removes links themselves, never their targets.
	return os.RemoveAll(show)
}

func rename(root, ro, rn, showOld, showNew string) error {
	if err := checkDirs(root, ro, showOld); err != nil {
		return err
	}
	if err := checkDirs(root, rn, showNew); err != nil {
		return err
	}
	return os.Rename(showOld, showNew)
}

func lchown(root, r, show string, uid, gid int) error {
	if err := checkDirs(root, r, show); err != nil {
		return err
	}
	return os.Lchown(show, uid, gid)
}
