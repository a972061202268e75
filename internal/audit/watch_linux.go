package audit

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pathWatch tells, without walking the path, whether the names that lead
// to the log could name another file than the one pml keeps open: an
// inotify instance watching the log's directory for its name, the
// workspace root for .pml, and every directory above for a move or
// removal of itself. The kernel queues an event before the rename,
// unlink or creation that caused it returns, so a non-blocking read
// (changed) sees every change that happened before it: the same answer
// as a lstat of the path, at the price of one read of an empty queue
// instead of a walk of every component (a third of the time here) and
// its check.
//
// Writes to the log are not watched (no IN_MODIFY): pml's own appends
// leave the queue empty.
type pathWatch struct {
	fd   int
	name string // the log's file name, in dir
	// dirName is the name of dir (.pml) in root.
	dirName string
	// dir and root are the watch descriptors of .pml and the workspace
	// root; up, of the directories above (only their own moves).
	dir, root int
	up        []int
	buf       [4096]byte
}

// nameMask: a name in a watched directory that came, went or was
// replaced; selfMask: the watched directory itself moved or removed.
const (
	selfMask = unix.IN_MOVE_SELF | unix.IN_DELETE_SELF
	nameMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | selfMask
	// Never through a link: a component that is one is not watched
	// (the open through safefs refuses it anyway).
	armFlags = unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR
)

// newPathWatch is nil when inotify is not there (or its instances are
// used up): the log then checks the path on every entry, as before.
func newPathWatch(path string) *pathWatch {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	return &pathWatch{fd: fd, name: filepath.Base(path), dirName: filepath.Base(filepath.Dir(path)), dir: -1, root: -1}
}

// arm watches the directories of path (…/root/.pml/name) as they are
// now. It is called before the check it guards (a lstat, or the open),
// so a change after that check is in the queue for the next changed.
func (w *pathWatch) arm(path string) error {
	dir := filepath.Dir(path)
	root := filepath.Dir(dir)
	var err error
	if w.dir, err = w.add(w.dir, dir, nameMask); err != nil {
		return err
	}
	if w.root, err = w.add(w.root, root, nameMask); err != nil {
		return err
	}
	var up []int
	for p := filepath.Dir(root); ; p = filepath.Dir(p) {
		wd, err := unix.InotifyAddWatch(w.fd, p, selfMask|armFlags)
		if err != nil {
			return err
		}
		up = append(up, wd)
		if p == filepath.Dir(p) {
			break
		}
	}
	for _, old := range w.up {
		if !slices.Contains(up, old) {
			_, _ = unix.InotifyRmWatch(w.fd, uint32(old))
		}
	}
	w.up = up
	return nil
}

// add watches p, removing the watch old when p is now another directory
// (its events would only be noise).
func (w *pathWatch) add(old int, p string, mask uint32) (int, error) {
	wd, err := unix.InotifyAddWatch(w.fd, p, mask|armFlags)
	if err != nil {
		return -1, err
	}
	if old >= 0 && old != wd {
		_, _ = unix.InotifyRmWatch(w.fd, uint32(old))
	}
	return wd, nil
}

// changed empties the queue and says whether anything in it could have
// changed what the path names: the log's name in .pml, .pml in the root,
// a watched directory moved or removed, a watch gone, the queue
// overflowed; or the queue could not be read. Anything else (other
// files of .pml or of the root) is dropped.
func (w *pathWatch) changed() bool {
	changed := false
	for {
		n, err := unix.Read(w.fd, w.buf[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			return changed
		}
		if err != nil || n < unix.SizeofInotifyEvent {
			return true
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&w.buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > n {
				return true
			}
			name := w.buf[off+unix.SizeofInotifyEvent : end]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			switch {
			case ev.Mask&(unix.IN_Q_OVERFLOW|unix.IN_IGNORED|unix.IN_UNMOUNT|selfMask) != 0:
				changed = true
			case int(ev.Wd) == w.dir && string(name) == w.name:
				changed = true
			case int(ev.Wd) == w.root && string(name) == w.dirName:
				changed = true
			}
			off = end
		}
	}
}

func (w *pathWatch) close() { _ = unix.Close(w.fd) }
