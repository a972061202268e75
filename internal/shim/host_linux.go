//go:build linux

package shim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Listener is the host end for one container: a private directory holding
// one socket. It accepts a single connection, from that container.
type Listener struct {
	dir string
	ln  *net.UnixListener
	// keep: a standby's (Claim): the socket and directory stay.
	keep bool
}

// maxSocketPath is what fits in sockaddr_un.sun_path with its NUL.
const maxSocketPath = 107

// Listen makes a private directory (0700) under base (see BaseDir) and
// listens on a socket in it for a container whose processes run as
// uid:gid. The socket must be reachable by that user: when pml runs as
// another user it can only be made so by root, and Listen refuses.
func Listen(base string, uid, gid int) (*Listener, error) {
	euid := os.Geteuid()
	if euid != 0 && euid != uid {
		return nil, fmt.Errorf("the container runs as uid %d and pml as uid %d: its process could not reach pml's socket", uid, euid)
	}
	dir, err := os.MkdirTemp(base, "pml-stdio-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, socketName)
	if len(path) > maxSocketPath {
		os.Remove(dir)
		return nil, fmt.Errorf("the socket path %s is longer than the %d bytes a unix socket address holds (set XDG_RUNTIME_DIR or TMPDIR to a shorter directory)", path, maxSocketPath)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	l := &Listener{dir: dir, ln: ln}
	// Only the container's user may connect (and root, who could anyway).
	err = os.Chmod(path, 0o600)
	if err == nil && euid != uid {
		err = errors.Join(os.Chown(dir, uid, gid), os.Chown(path, uid, gid))
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("giving the socket to uid %d: %w", uid, err)
	}
	return l, nil
}

// BaseDir is where Listen makes its directories: $XDG_RUNTIME_DIR (a
// private tmpfs on most desktops) when it is set, else the temporary
// directory.
func BaseDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
	}
	return os.TempDir()
}

// Dir is the host directory to mount read-only at RunDir.
func (l *Listener) Dir() string { return l.dir }

// Close stops listening and removes the socket and its directory. The
// directory may go while the container runs: its mount keeps it, and the
// socket is not needed once connected.
func (l *Listener) Close() {
	_ = l.ln.Close() // also unlinks the socket, unless kept
	if !l.keep {
		_ = os.Remove(l.dir)
	}
}

// Accept waits for the shim of container id (its full id) to connect and
// closes the listener. A connection from any other process (another
// process of the same uid on the host, say) is refused and the wait goes
// on. It gives up when ctx ends or gone is closed (the container exited
// before connecting).
func (l *Listener) Accept(ctx context.Context, id string, gone <-chan struct{}) (*net.UnixConn, error) {
	defer l.Close()
	stop := make(chan struct{})
	defer close(stop)
	var why error
	go func() {
		select {
		case <-ctx.Done():
		case <-gone:
		case <-stop:
			return
		}
		// Unblocks the Accept below.
		_ = l.ln.SetDeadline(time.Unix(1, 0))
	}()
	for {
		c, err := l.ln.AcceptUnix()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				err = ctx.Err()
			case isClosed(gone):
				err = errors.New("the container exited before its shim connected")
			}
			return nil, errors.Join(err, why)
		}
		if err := peerIn(c, id); err != nil {
			c.Close()
			why = err
			continue
		}
		return c, nil
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// peerIn checks that the process at the other end of c belongs to
// container id: its cgroup path names the container. Only root can move
// a process into another cgroup, so a host process cannot pass for it.
func peerIn(c *net.UnixConn, id string) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("reading the peer of pml's socket: %w", cerr)
	}
	if cred.Pid <= 0 {
		// The peer's pid is not visible from pml's pid namespace.
		return errors.New("refused a connection whose process pml cannot see")
	}
	cg, err := readCgroup(int(cred.Pid))
	if err != nil {
		return fmt.Errorf("refused a connection from pid %d: %w", cred.Pid, err)
	}
	if !inContainer(cg, id) {
		return fmt.Errorf("refused a connection from pid %d, which is not a process of container %.12s", cred.Pid, id)
	}
	return nil
}

// readCgroup reads a process's cgroup membership (a variable so tests can
// stand in for a container).
var readCgroup = func(pid int) ([]byte, error) {
	return os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
}

// inContainer reports whether a /proc/PID/cgroup file places the process
// in container id: a path component names it (".../docker/ID",
// ".../docker-ID.scope", with cgroup v1 or v2).
func inContainer(cgroup []byte, id string) bool {
	if len(id) < 12 {
		return false
	}
	for _, line := range strings.Split(string(cgroup), "\n") {
		_, path, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		_, path, _ = strings.Cut(path, ":")
		for _, part := range strings.Split(path, "/") {
			part = strings.TrimSuffix(part, ".scope")
			if i := strings.LastIndexAny(part, "-"); i >= 0 {
				part = part[i+1:]
			}
			if part == id {
				return true
			}
		}
	}
	return false
}

// StandbyPrefix begins the name of a standby container's socket
// directory under BaseDir.
const StandbyPrefix = "pml-standby-"

// StandbyDir makes the private directory (0700, under base) a standby
// container mounts at RunDir: empty until a pml claims the container
// (Claim). A container of uid:gid must be able to connect there later:
// as for Listen, only root can give it to another user.
func StandbyDir(base string, uid, gid int) (string, error) {
	euid := os.Geteuid()
	if euid != 0 && euid != uid {
		return "", fmt.Errorf("the container runs as uid %d and pml as uid %d: its process could not reach pml's socket", uid, euid)
	}
	dir, err := os.MkdirTemp(base, StandbyPrefix)
	if err != nil {
		return "", err
	}
	if len(filepath.Join(dir, socketName)) > maxSocketPath {
		os.Remove(dir)
		return "", fmt.Errorf("the socket path under %s is longer than a unix socket address holds", dir)
	}
	if euid != uid {
		if err := os.Chown(dir, uid, gid); err != nil {
			os.Remove(dir)
			return "", err
		}
	}
	return dir, nil
}

// ErrClaimed: another pml claimed the standby first (its socket is
// there), or its directory is gone.
var ErrClaimed = errors.New("the standby container was claimed by another pml")

// Claim claims the standby container whose socket directory is dir, a
// directory StandbyDir made under base for uid (checked here: a path a
// container's mount names is not trusted), by making its socket: the
// file system lets exactly one pml bind it (ErrClaimed for the others).
// The socket file stays when the listener closes, so that no later pml
// can claim the same container; Remove removes it with its directory.
func Claim(base, dir string, uid, gid int) (*Listener, error) {
	if filepath.Dir(dir) != filepath.Clean(base) || !strings.HasPrefix(filepath.Base(dir), StandbyPrefix) {
		return nil, fmt.Errorf("%s is not a standby directory of this pml's (under %s)", dir, base)
	}
	st, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrClaimed
	}
	if err != nil {
		return nil, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	owner := os.Geteuid()
	if owner == 0 {
		owner = uid
	}
	if !st.IsDir() || st.Mode().Perm() != 0o700 || !ok || int(sys.Uid) != owner {
		return nil, fmt.Errorf("%s is not a private directory of uid %d (mode %s)", dir, owner, st.Mode())
	}
	path := filepath.Join(dir, socketName)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, os.ErrNotExist) {
			return nil, ErrClaimed
		}
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	l := &Listener{dir: dir, ln: ln, keep: true}
	err = os.Chmod(path, 0o600)
	if err == nil && os.Geteuid() != uid {
		err = os.Chown(path, uid, gid)
	}
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("giving the socket to uid %d: %w", uid, err)
	}
	return l, nil
}

// RemoveStandbyDir removes a claimed standby's directory (and its
// socket), once its container is gone.
func RemoveStandbyDir(base, dir string) {
	if filepath.Dir(dir) == filepath.Clean(base) && strings.HasPrefix(filepath.Base(dir), StandbyPrefix) {
		_ = os.Remove(filepath.Join(dir, socketName))
		_ = os.Remove(dir)
		removeClaim(base, dir)
	}
}

// SweepStandbyDirs removes the directories of standbys that expired
// unclaimed: older than age and without a socket (a claimed one's goes
// with its container).
func SweepStandbyDirs(base string, age time.Duration) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	defer sweepClaims(base, ents, age)
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), StandbyPrefix) {
			continue
		}
		dir := filepath.Join(base, e.Name())
		st, err := os.Lstat(dir)
		if err != nil || time.Since(st.ModTime()) < age {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, socketName)); err == nil {
			continue
		}
		_ = os.Remove(dir)
	}
}

// Pipes gives the server behind conn (a shim started with PipesFlag) two
// pipes for its stdin and stdout, and returns pml's ends of them,
// non-blocking: stdin to write the server's input into, stdout to read
// its output from. conn stays the link (its end stops the server). Both
// nil and no error: the shim keeps the socket as the server's stdio (the
// descriptors did not reach it), and conn carries the bytes. An error:
// the shim did not answer within wait, or is gone.
func Pipes(conn *net.UnixConn, wait time.Duration) (stdin, stdout *os.File, err error) {
	var in, out [2]int
	if err := syscall.Pipe2(in[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("making the server's stdin: %w", err)
	}
	if err := syscall.Pipe2(out[:], syscall.O_CLOEXEC); err != nil {
		syscall.Close(in[0])
		syscall.Close(in[1])
		return nil, nil, fmt.Errorf("making the server's stdout: %w", err)
	}
	mine := func() {
		syscall.Close(in[1])
		syscall.Close(out[0])
	}
	// pml's ends only: a pipe's two ends are two open file descriptions,
	// and the server's stay blocking, as a client's pipes are.
	if err := errors.Join(syscall.SetNonblock(in[1], true), syscall.SetNonblock(out[0], true)); err != nil {
		syscall.Close(in[0])
		syscall.Close(out[1])
		mine()
		return nil, nil, err
	}
	_, _, err = conn.WriteMsgUnix([]byte{pipesHello}, syscall.UnixRights(in[0], out[1]), nil)
	syscall.Close(in[0])
	syscall.Close(out[1])
	if err != nil {
		mine()
		return nil, nil, fmt.Errorf("sending the server its pipes: %w", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	var ack [1]byte
	_, err = conn.Read(ack[:])
	_ = conn.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		mine()
		return nil, nil, fmt.Errorf("the in-container program did not take the server's pipes: %w", err)
	case ack[0] != pipesYes:
		mine()
		return nil, nil, nil
	}
	return os.NewFile(uintptr(in[1]), "server stdin"), os.NewFile(uintptr(out[0]), "server stdout"), nil
}
