// Package safefs is the only way pml opens its own files inside the
// workspace on the host: .pml.json, .mcp.json (and its backup), .env,
// everything under .pml/, and the dependency files it hashes.
//
// The workspace's contents are untrusted (a repository can ship any of
// these names as a symbolic link to /root/.bashrc, as a FIFO, or as a
// 100 MiB file), while pml often runs as root. So every operation here:
//   - resolves the path beneath the workspace root refusing a symbolic
//     link at every component (openat2 with RESOLVE_BENEATH and
//     RESOLVE_NO_SYMLINKS on Linux, else a walk with O_NOFOLLOW);
//   - opens the leaf with O_NONBLOCK and O_NOFOLLOW and refuses, after an
//     fstat of what it opened, anything but a regular file (a directory
//     where one is meant), so a FIFO or a device never blocks or floods;
//   - bounds what it reads;
//   - writes by temp file and rename in the same directory (relative to a
//     directory descriptor), so nothing is written through a link, a hard
//     link or into a file swapped in between a check and the write.
//
// The workspace root itself is trusted: the person running pml chose it
// and pml resolved it. Paths outside it (~/.cache) are not pml's concern
// here.
package safefs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MaxConfig bounds the configuration and state files pml reads
// (.pml.json, .mcp.json, .env, the lockfile and caches): a few MiB is far
// beyond any real one, and far below what would hurt.
const MaxConfig int64 = 4 << 20

// Sentinel errors, for errors.Is; the *Error carrying them says what
// happened to which path and what to do.
var (
	ErrSymlink    = errors.New("symbolic link")
	ErrNotRegular = errors.New("not a regular file")
	ErrNotDir     = errors.New("not a directory")
	ErrTooLarge   = errors.New("file too large")
	ErrOutside    = errors.New("outside the workspace")
	ErrHardLinked = errors.New("hard-linked")
)

// Error is a refused path.
type Error struct {
	// Path is the path as the user knows it (workspace root joined).
	Path string
	// Problem completes "<Path> ...": "is a symbolic link to /x".
	Problem string
	// Fix says what the user can do.
	Fix string
	Err error
}

func (e *Error) Error() string {
	if e.Fix == "" {
		return e.Path + " " + e.Problem
	}
	return e.Path + " " + e.Problem + "; " + e.Fix
}

func (e *Error) Unwrap() error { return e.Err }

const noFollow = "pml does not follow links inside the workspace for its own files"

func symlinkError(path, target string, dir bool) error {
	what := "a regular file"
	if dir {
		what = "a real directory"
	}
	problem := "is a symbolic link"
	if target != "" {
		problem += " (to " + target + ")"
	}
	return &Error{Path: path, Problem: problem, Fix: noFollow + ": replace it with " + what, Err: ErrSymlink}
}

func notRegularError(path string, mode fs.FileMode) error {
	if mode.IsDir() {
		return &Error{Path: path, Problem: "is a directory, not a regular file", Fix: "pml expects a file here: remove or rename the directory", Err: ErrNotRegular}
	}
	return &Error{Path: path, Problem: "is not a regular file (it is " + kind(mode) + ")",
		Fix: "pml only opens regular files inside the workspace for its own use: remove it or replace it with a regular file", Err: ErrNotRegular}
}

func notDirError(path string, mode fs.FileMode) error {
	return &Error{Path: path, Problem: "is not a directory (it is " + kind(mode) + ")",
		Fix: "pml keeps its files in a real directory here: remove it and run pml again", Err: ErrNotDir}
}

func tooLargeError(path string, size, max int64) error {
	return &Error{Path: path, Problem: fmt.Sprintf("is larger than %s (%d bytes)", human(max), size),
		Fix: "pml does not read files this large: shrink or remove it", Err: ErrTooLarge}
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	}
	return "a special file"
}

func human(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// rel turns name (absolute beneath root, or relative to it) into a clean
// relative path that stays beneath root, and the path to show the user.
func rel(root, name string) (string, string, error) {
	if root == "" {
		return "", name, errors.New("safefs: no workspace root")
	}
	r := name
	if filepath.IsAbs(name) {
		var err error
		r, err = filepath.Rel(filepath.Clean(root), filepath.Clean(name))
		if err != nil {
			return "", name, &Error{Path: name, Problem: "is outside the workspace " + root, Err: ErrOutside}
		}
	}
	r = filepath.Clean(r)
	if r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) || filepath.IsAbs(r) {
		return "", name, &Error{Path: name, Problem: "is outside the workspace " + root, Err: ErrOutside}
	}
	return r, filepath.Join(root, r), nil
}

// Open opens the regular file name beneath root for reading. A symbolic
// link at any component, or anything but a regular file, is refused.
func Open(root, name string) (*os.File, error) {
	r, show, err := rel(root, name)
	if err != nil {
		return nil, err
	}
	return openRead(root, r, show)
}

// ReadFile reads the regular file name beneath root, refusing it past
// max bytes. A missing file is an error for which errors.Is(err,
// fs.ErrNotExist) holds.
func ReadFile(root, name string, max int64) ([]byte, error) {
	return ReadFileContext(context.Background(), root, name, max)
}

// ReadFileContext is ReadFile stopping, between chunks, when ctx ends.
func ReadFileContext(ctx context.Context, root, name string, max int64) ([]byte, error) {
	b, _, err := readFile(ctx, root, name, max)
	return b, err
}

// ReadFileInfo is ReadFile with the file's own stat, taken on the
// descriptor it read (not on the path, which may name another file by
// then): for a reader that keeps what it read until the file changes.
func ReadFileInfo(root, name string, max int64) ([]byte, fs.FileInfo, error) {
	return readFile(context.Background(), root, name, max)
}

func readFile(ctx context.Context, root, name string, max int64) ([]byte, fs.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	f, err := Open(root, name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Size() > max {
		return nil, nil, tooLargeError(f.Name(), st.Size(), max)
	}
	buf := make([]byte, 0, st.Size()+1)
	// A small file (a configuration, a record) is read in one chunk of
	// its size, not 64 KiB of garbage on each read.
	chunk := make([]byte, min(64<<10, st.Size()+512))
	lr := io.LimitReader(f, max+1)
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		n, err := lr.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if int64(len(buf)) > max {
			// It grew after the fstat.
			return nil, nil, tooLargeError(f.Name(), int64(len(buf)), max)
		}
		if err == io.EOF {
			return buf, st, nil
		}
		if err != nil {
			return nil, nil, err
		}
	}
}

// CopyContext copies r to w in chunks, stopping when ctx ends: hashing a
// large installed file honours the call's deadline.
func CopyContext(ctx context.Context, w io.Writer, r io.Reader) (int64, error) {
	var n int64
	chunk := make([]byte, 256<<10)
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		m, err := r.Read(chunk)
		if m > 0 {
			if _, werr := w.Write(chunk[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// OpenAppend opens (creating it with perm) the regular file name beneath
// root for appending, creating no directory. A file with other hard links
// is refused: appending would write into whatever else it is. The file is
// readable too: an appender looks at the last byte, to start its line on
// a fresh one (internal/audit).
func OpenAppend(root, name string, perm fs.FileMode) (*os.File, error) {
	r, show, err := rel(root, name)
	if err != nil {
		return nil, err
	}
	return openWrite(root, r, show, os.O_RDWR|os.O_APPEND|os.O_CREATE, perm)
}

// OpenLock opens (creating it with perm) the regular file name beneath
// root read-write, for a lock held on it; nothing is written to it.
func OpenLock(root, name string, perm fs.FileMode) (*os.File, error) {
	r, show, err := rel(root, name)
	if err != nil {
		return nil, err
	}
	return openWrite(root, r, show, os.O_RDWR|os.O_CREATE, perm)
}

// WriteFile replaces name beneath root with data, atomically: a temporary
// file in the same directory, synced, then renamed over name. Readers see
// the old or the new file, never a part; a link or hard link at name is
// never written through. A symbolic link at name is refused rather than
// replaced (the user put it there, or the repository did). The directory
// must exist.
func WriteFile(root, name string, data []byte, perm fs.FileMode) error {
	r, show, err := rel(root, name)
	if err != nil {
		return err
	}
	if r == "." {
		return notRegularError(show, fs.ModeDir)
	}
	if err := writeAtomic(root, r, show, data, perm, true); err != nil {
		return err
	}
	return nil
}

// WriteCache is WriteFile without the sync: for a cache, which pml
// rebuilds when it is missing or unreadable, so that a write on the way
// to an answer (a server's tool list, at its first start) does not wait
// for the disk. Readers still see the old or the new file, never a part;
// after a power loss it may be empty.
func WriteCache(root, name string, data []byte, perm fs.FileMode) error {
	r, show, err := rel(root, name)
	if err != nil {
		return err
	}
	if r == "." {
		return notRegularError(show, fs.ModeDir)
	}
	return writeAtomic(root, r, show, data, perm, false)
}

// MkdirAll creates name beneath root and its missing parents with perm,
// refusing a symbolic link or a non-directory at any component.
func MkdirAll(root, name string, perm fs.FileMode) error {
	r, show, err := rel(root, name)
	if err != nil {
		return err
	}
	return mkdirAll(root, r, show, perm)
}

// Lstat describes name beneath root without following it, refusing a
// symbolic link at any directory on the way.
func Lstat(root, name string) (fs.FileInfo, error) {
	r, show, err := rel(root, name)
	if err != nil {
		return nil, err
	}
	return lstat(root, r, show)
}

// Remove removes the file or empty directory name beneath root (a link is
// removed itself, never its target).
func Remove(root, name string) error {
	r, show, err := rel(root, name)
	if err != nil {
		return err
	}
	if r == "." {
		return &Error{Path: show, Problem: "is the workspace itself", Err: ErrOutside}
	}
	return remove(root, r, show)
}

// RemoveAll removes name beneath root and everything below it, never
// following a link (links are removed themselves). A missing name is not
// an error.
func RemoveAll(root, name string) error {
	r, show, err := rel(root, name)
	if err != nil {
		return err
	}
	if r == "." {
		return &Error{Path: show, Problem: "is the workspace itself", Err: ErrOutside}
	}
	return removeAll(root, r, show)
}

// Rename renames oldname to newname, both beneath root, through their
// directories' descriptors (neither directory may be reached by a link).
func Rename(root, oldname, newname string) error {
	ro, showOld, err := rel(root, oldname)
	if err != nil {
		return err
	}
	rn, showNew, err := rel(root, newname)
	if err != nil {
		return err
	}
	return rename(root, ro, rn, showOld, showNew)
}

// Lchown changes the owner of name beneath root itself (never a link's
// target).
func Lchown(root, name string, uid, gid int) error {
	r, show, err := rel(root, name)
	if err != nil {
		return err
	}
	return lchown(root, r, show, uid, gid)
}

// StateDir is pml's state directory in a workspace.
const StateDir = ".pml"

// CheckStateDir refuses a workspace whose .pml is not a real directory (a
// symbolic link, a file, a FIFO): pml would keep its audit log and state
// wherever it points. A missing .pml is fine (pml creates it).
func CheckStateDir(root string) error {
	p := filepath.Join(root, StateDir)
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("cannot check %s: %w", p, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		t, _ := os.Readlink(p)
		return &Error{Path: p, Problem: fmt.Sprintf("is a symbolic link (to %s)", t),
			Fix: fmt.Sprintf("remove %s and run pml again; pml keeps its state in a real directory and never follows a link there", p), Err: ErrSymlink}
	case !fi.IsDir():
		return &Error{Path: p, Problem: "is not a directory (it is " + kind(fi.Mode()) + ")",
			Fix: fmt.Sprintf("remove %s and run pml again; pml keeps its state in a real directory", p), Err: ErrNotDir}
	}
	return nil
}

// EnsureStateDir checks .pml (see CheckStateDir) and creates it when
// missing.
func EnsureStateDir(root string) error {
	if err := CheckStateDir(root); err != nil {
		return err
	}
	return MkdirAll(root, StateDir, 0o755)
}

// explain turns a failed open or walk into an *Error naming the first
// component that is a link or not a directory. Only used to word an error
// (it re-reads the path by name), never to decide.
func explain(root, r, show string, err error, leafIsDir bool) error {
	parts := strings.Split(r, string(filepath.Separator))
	p := root
	for i, c := range parts {
		if c == "." || c == "" {
			continue
		}
		p = filepath.Join(p, c)
		fi, lerr := os.Lstat(p)
		if lerr != nil {
			break
		}
		last := i == len(parts)-1
		if fi.Mode()&fs.ModeSymlink != 0 {
			t, _ := os.Readlink(p)
			return symlinkError(p, t, !last || leafIsDir)
		}
		if !last && !fi.IsDir() {
			return notDirError(p, fi.Mode())
		}
		if last {
			if leafIsDir && !fi.IsDir() {
				return notDirError(p, fi.Mode())
			}
			if !leafIsDir && !fi.Mode().IsRegular() {
				return notRegularError(p, fi.Mode())
			}
		}
	}
	return &fs.PathError{Op: "open", Path: show, Err: unwrapPathErr(err)}
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// fillTemp writes data to the new temporary file f, sets its mode, syncs
// it (sync) and closes it: the part of an atomic write both platforms
// share.
func fillTemp(f *os.File, data []byte, perm fs.FileMode, show string, sync bool) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(perm.Perm())
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &fs.PathError{Op: "write", Path: show, Err: unwrapPathErr(err)}
	}
	return nil
}

// Locked runs fn while holding an exclusive lock on dir/name.lock (dir is
// created 0700 when missing): the read-change-write of a small record
// that several pml processes share (trust records, the projects pml
// knows). what names the record in errors.
func Locked(dir, name, what string, fn func() error) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cannot create %s for %s: %w", dir, what, err)
	}
	lock, err := OpenLock(dir, name+".lock", 0o600)
	if err != nil {
		return fmt.Errorf("cannot lock %s: %w", what, err)
	}
	defer lock.Close()
	if err := Lock(lock); err != nil {
		return fmt.Errorf("cannot lock %s: %w", what, err)
	}
	defer Unlock(lock)
	return fn()
}
