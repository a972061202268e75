//go:build linux

package shim

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Exec connects to the socket at path and runs argv (looked up in $PATH
// as Docker does) with the connection on its stdin and stdout; stderr and
// the environment are passed on untouched. The shim stays as the
// container's PID 1 beside it, only to watch the link: when pml's end of
// the socket is gone (pml exited or was killed), the server and whatever
// it started are killed and the container ends, so a server that ignores
// the end of its input cannot outlive pml and go on writing to the
// workspace. The bytes never pass through the shim; the container exits
// with the server's own exit status, and signals sent to the container
// (docker stop) are passed on to the server. It returns only when it
// fails: a *NoConnectionError before pml was reached, else the reason
// argv could not be run. With pipes (PipesFlag), the server's stdin and
// stdout are the two pipes pml sends over the socket (takePipes), and
// the socket stays only as the link.
func Exec(path string, pipes bool, argv []string) error {
	if len(argv) == 0 {
		return errors.New("no command to run")
	}
	// The socket is made with raw system calls, not the net package: it
	// must stay a plain blocking descriptor for the program that inherits
	// it (many read stdin with blocking reads and fail on EAGAIN).
	fd, err := dial(path)
	if err != nil {
		return &NoConnectionError{Err: err}
	}
	return run(fd, pipes, argv)
}

// dial connects a blocking unix socket to path.
func dial(path string) (int, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// ExecStandby is Exec for a standby container (see Standby): nothing of
// the server runs until a pml claims the container by making the socket
// at path, for at most wait; it then connects and runs argv as Exec
// does. Unclaimed for wait, it returns ErrStandbyExpired and the
// container ends. The socket's directory is watched with inotify (an
// idle standby wakes up only when something happens there), with a slow
// poll beside it for engines where events from the host do not reach
// the container's view of the mount.
func ExecStandby(path string, wait time.Duration, pipes bool, argv []string) error {
	if len(argv) == 0 {
		return errors.New("no command to run")
	}
	end := time.Now().Add(wait)
	in, ierr := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	every := 10 * time.Millisecond
	if ierr == nil {
		defer unix.Close(in)
		if _, err := unix.InotifyAddWatch(in, filepath.Dir(path), unix.IN_CREATE|unix.IN_ATTRIB|unix.IN_MOVED_TO); err == nil {
			every = 250 * time.Millisecond
		}
	}
	buf := make([]byte, 4096)
	refused := 0
	for {
		fd, err := dial(path)
		if err == nil {
			return run(fd, pipes, argv)
		}
		left := time.Until(end)
		if left <= 0 {
			return ErrStandbyExpired
		}
		if errors.Is(err, syscall.ECONNREFUSED) && refused < 100 {
			// Bound but not yet listening: a moment (a socket that
			// stays refused is waited on as a missing one).
			refused++
			left = min(left, time.Millisecond)
		}
		timeout := int(min(left, every) / time.Millisecond)
		fds := []unix.PollFd{{Fd: int32(in), Events: unix.POLLIN}}
		if ierr != nil {
			fds = nil
		}
		if _, err := unix.Poll(fds, max(timeout, 1)); err == nil && ierr == nil {
			for {
				if n, _ := unix.Read(in, buf); n <= 0 {
					break
				}
			}
		}
	}
}

// run runs argv with fd (connected to pml) on its stdin and stdout, or
// with pipes the two pml sends over it; it returns only when argv cannot
// be run.
func run(fd int, pipes bool, argv []string) error {
	in, out := fd, fd
	if pipes {
		if r, w, ok := takePipes(fd); ok {
			in, out = r, w
		}
	}
	// closePipes closes the server's pipes in the shim: once the server
	// has them (the shim keeps only the link), or when it cannot run.
	closePipes := func() {
		if in != fd {
			syscall.Close(in)
			syscall.Close(out)
		}
	}
	prog, err := exec.LookPath(argv[0])
	if errors.Is(err, exec.ErrDot) {
		// Docker runs a command found through a relative $PATH entry;
		// so does the shim.
		err = nil
	}
	if err != nil {
		closePipes()
		syscall.Close(fd)
		return fmt.Errorf("cannot run the server's command: %w", err)
	}
	// Signals for the server are caught before it starts, so none is
	// lost in between.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	// The child gets the socket (or the pipes) on 0 and 1 (ForkExec
	// duplicates them there without close-on-exec) and stderr as it is.
	pid, err := syscall.ForkExec(prog, argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{uintptr(in), uintptr(out), 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		closePipes()
		syscall.Close(fd)
		return fmt.Errorf("cannot run the server's command %s: %w", prog, err)
	}
	// Only the server holds them now: its stdout's end comes to pml when
	// it exits.
	closePipes()
	go func() {
		for sig := range sigs {
			_ = syscall.Kill(pid, sig.(syscall.Signal))
		}
	}()
	go func() {
		waitHangup(fd)
		// pml is gone: nobody will read the server's answers any more.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		fmt.Fprintln(os.Stderr, "pml: the connection to pml is gone; the server was stopped")
		os.Exit(137)
	}()
	os.Exit(reap(pid))
	return nil
}

// takePipes receives the server's stdin and stdout from pml over fd (one
// pipesHello byte carrying two descriptors) and answers whether it took
// them (pipesYes) or keeps the socket (pipesNo: none came, as where the
// container runtime does not pass descriptors, or they are not a read
// end and a write end of pipes). The bytes between pml and a server
// then pass through a pipe, not a socket: about 10 % of a warm call's
// time on a small machine, measured natively (docs/performance.md).
func takePipes(fd int) (in, out int, ok bool) {
	var buf [1]byte
	oob := make([]byte, syscall.CmsgSpace(2*4))
	var fds []int
	n, oobn, _, _, err := syscall.Recvmsg(fd, buf[:], oob, syscall.MSG_CMSG_CLOEXEC)
	if err == nil && n == 1 && buf[0] == pipesHello {
		if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for i := range msgs {
				if got, err := syscall.ParseUnixRights(&msgs[i]); err == nil {
					fds = append(fds, got...)
				}
			}
		}
	}
	ok = len(fds) == 2 && pipeEnd(fds[0], syscall.O_RDONLY) && pipeEnd(fds[1], syscall.O_WRONLY)
	ack := []byte{pipesNo}
	if ok {
		ack[0] = pipesYes
	}
	if _, err := syscall.Write(fd, ack); err != nil {
		ok = false
	}
	if !ok {
		for _, f := range fds {
			syscall.Close(f)
		}
		return -1, -1, false
	}
	return fds[0], fds[1], true
}

// pipeEnd reports whether fd is a blocking pipe end opened for mode.
func pipeEnd(fd, mode int) bool {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return false
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	return err == nil && fl&unix.O_ACCMODE == mode && fl&unix.O_NONBLOCK == 0
}

// waitHangup returns once the peer (pml) has closed its end of the socket
// entirely. A half-close (pml telling the server its input is over, at a
// normal stop) is not a hang-up: the server may still answer and exit
// by itself.
func waitHangup(fd int) {
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: 0}}
		n, err := unix.Poll(fds, -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
			return
		}
	}
}

// reap waits for the server, collecting any other child that ends (the
// shim is PID 1: orphans are re-parented to it), and returns the exit
// status a shell would report for the server.
func reap(pid int) int {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 126
		}
		if got != pid {
			continue
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}
