package term

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ProtocolStdin is stdin for a protocol session (pml stdio). Where it is
// a pipe, what an MCP client gives its server, it is opened again
// (/proc/self/fd/0: a new open file description of the same pipe)
// non-blocking, so that Go's network poller waits for the client's
// frames: a read of a blocking stdin holds a thread in the system call
// with the processor the reader was on, and the call the frame just
// handed to a worker goroutine waits for another thread to take it over
// (tens of microseconds on every call). The new description is pml's
// own: stdin's (shared with whoever else holds the pipe's read end) keeps
// its mode. Anything else (a terminal, a file, a socket) is os.Stdin.
func ProtocolStdin() *os.File {
	var st unix.Stat_t
	if err := unix.Fstat(0, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return os.Stdin
	}
	fd, err := unix.Open("/proc/self/fd/0", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return os.Stdin
	}
	var again unix.Stat_t
	if unix.Fstat(fd, &again) != nil || again.Dev != st.Dev || again.Ino != st.Ino {
		// Not the same pipe (fd 0 changed under us): not ours to read.
		_ = unix.Close(fd)
		return os.Stdin
	}
	// A non-blocking descriptor: os.NewFile puts it on the poller.
	return os.NewFile(uintptr(fd), "/dev/stdin (fd "+strconv.Itoa(fd)+")")
}
