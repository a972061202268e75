package audit

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/pml-dev/pml/internal/rawio"
)

// pathWatch tells, without walking the path, whether the names that lead
// to a log could name another file than the one pml keeps open: inotify
// watches on the log's directory for its name, on the workspace root for
// .pml, and on every directory above for a move or removal of itself.
// The kernel queues an event before the rename, unlink or creation that
// caused it returns, so a non-blocking read (changed) sees every change
// that happened before it: the same answer as a lstat of the path, at the
// price of one read of an empty queue instead of a walk of every
// component (a third of the time here) and its check.
//
// inotify does not see a file system mounted over a directory of the
// path (a .pml/ moved to a disk of its own while pml runs): the table of
// mounts is watched too (/proc/self/mountinfo, whose poll says when it
// changed), and a change there sends every log back to its lstat. Both
// are asked at once, with one epoll_wait that does not wait.
//
// Writes to the log are not watched (no IN_MODIFY): pml's own appends
// leave the queue empty. The logs of a process share one inotify
// instance (watches, which they may share too, are plenty; instances
// are few, 128 a user by default, and a container that may write the
// workspace is started only while internal/protect gets one).
type pathWatch struct {
	name string // the log's file name, in dir
	// dirName is the name of dir (.pml) in root.
	dirName string
	// dir and root are the watch descriptors of .pml and the workspace
	// root; up, of the directories above (only their own moves).
	dir, root int
	up        []int
	// stale: a change concerning this log was read; under inotify.mu.
	stale bool
}

// inotify is the process's instance, made at the first log's first
// write; fd -1 before, -2 when it could not be made (the logs then check
// their path on every entry).
var inotify = struct {
	mu sync.Mutex
	fd int
	// ep holds fd (readable: events queued) and mounts (a priority
	// event: the mount table changed).
	ep, mounts int
	logs       map[*pathWatch]struct{}
	buf        [4096]byte
	events     [2]unix.EpollEvent
}{fd: -1, logs: map[*pathWatch]struct{}{}}

// setup makes the process's instance, its mount watch and the epoll
// that asks both; false when any cannot be made.
func setup() bool {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return false
	}
	mounts, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = unix.Close(fd)
		return false
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err == nil {
		err = unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
	}
	if err == nil {
		err = unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, mounts, &unix.EpollEvent{Events: unix.EPOLLPRI, Fd: int32(mounts)})
	}
	if err != nil {
		for _, f := range []int{fd, mounts, ep} {
			if f >= 0 {
				_ = unix.Close(f)
			}
		}
		return false
	}
	inotify.fd, inotify.mounts, inotify.ep = fd, mounts, ep
	return true
}

// nameMask: a name in a watched directory that came, went or was
// replaced; selfMask: the watched directory itself moved or removed.
// Watches are added to (IN_MASK_ADD): a directory another log watches
// keeps what that log asked for.
const (
	selfMask = unix.IN_MOVE_SELF | unix.IN_DELETE_SELF
	nameMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | selfMask
	// Never through a link: a component that is one is not watched
	// (the open through safefs refuses it anyway).
	armFlags = unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR | unix.IN_MASK_ADD
)

// newPathWatch is nil when inotify is not there (or its instances are
// used up): the log then checks the path on every entry, as before.
func newPathWatch(path string) *pathWatch {
	inotify.mu.Lock()
	defer inotify.mu.Unlock()
	if inotify.fd == -1 && !setup() {
		inotify.fd = -2
	}
	if inotify.fd < 0 {
		return nil
	}
	w := &pathWatch{name: filepath.Base(path), dirName: filepath.Base(filepath.Dir(path)), dir: -1, root: -1}
	inotify.logs[w] = struct{}{}
	return w
}

// arm watches the directories of path (…/root/.pml/name) as they are
// now. It is called before the check it guards (a lstat, or the open),
// so a change after that check is in the queue for the next changed.
func (w *pathWatch) arm(path string) error {
	inotify.mu.Lock()
	defer inotify.mu.Unlock()
	dir := filepath.Dir(path)
	root := filepath.Dir(dir)
	var err error
	if w.dir, err = unix.InotifyAddWatch(inotify.fd, dir, nameMask|armFlags); err != nil {
		return err
	}
	if w.root, err = unix.InotifyAddWatch(inotify.fd, root, nameMask|armFlags); err != nil {
		return err
	}
	w.up = w.up[:0]
	for p := filepath.Dir(root); ; p = filepath.Dir(p) {
		wd, err := unix.InotifyAddWatch(inotify.fd, p, selfMask|armFlags)
		if err != nil {
			return err
		}
		w.up = append(w.up, wd)
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// changed empties the queue and says whether anything read from it,
// now or for another log before, could have changed what this log's
// path names: its name in .pml, .pml in the root, a watched directory
// moved or removed, a watch gone, the queue overflowed; or the queue
// could not be read. Anything else (other files of .pml or of the root)
// is dropped.
func (w *pathWatch) changed() bool {
	inotify.mu.Lock()
	defer inotify.mu.Unlock()
	poll()
	c := w.stale
	w.stale = false
	return c
}

// poll asks, without waiting, whether events are queued or the mounts
// changed, and marks the logs they concern; the caller holds inotify.mu.
// (The mount table's poll reports each change once.)
func poll() {
	for {
		// Raw: this runs on every call (internal/rawio).
		n, err := rawio.PollNow(inotify.ep, inotify.events[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			staleAll()
			return
		}
		for _, ev := range inotify.events[:n] {
			if int(ev.Fd) == inotify.mounts {
				staleAll()
			} else {
				drain()
			}
		}
		return
	}
}

func staleAll() {
	for w := range inotify.logs {
		w.stale = true
	}
}

// drain reads what the queue holds and marks the logs it concerns; the
// caller holds inotify.mu.
func drain() {
	all := staleAll
	for {
		n, err := unix.Read(inotify.fd, inotify.buf[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			return
		}
		if err != nil || n < unix.SizeofInotifyEvent {
			all()
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&inotify.buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > n {
				all()
				return
			}
			name := inotify.buf[off+unix.SizeofInotifyEvent : end]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				all()
			}
			for w := range inotify.logs {
				if w.concerns(int(ev.Wd), ev.Mask, name) {
					w.stale = true
				}
			}
			off = end
		}
	}
}

// concerns reports whether an event could change what w's path names.
func (w *pathWatch) concerns(wd int, mask uint32, name []byte) bool {
	mine := wd == w.dir || wd == w.root || slices.Contains(w.up, wd)
	switch {
	case !mine:
		return false
	case mask&(unix.IN_IGNORED|unix.IN_UNMOUNT|selfMask) != 0:
		return true
	case wd == w.dir && string(name) == w.name:
		return true
	case wd == w.root && string(name) == w.dirName:
		return true
	}
	return false
}

// close stops telling w of changes (the watches stay while another log
// may use them; each goes with its directory).
func (w *pathWatch) close() {
	inotify.mu.Lock()
	defer inotify.mu.Unlock()
	delete(inotify.logs, w)
}
