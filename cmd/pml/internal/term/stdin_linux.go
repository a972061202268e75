package term

import (
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/pml-dev/pml/internal/rawio"
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
// its mode. It is read with raw system calls (internal/rawio): a frame's
// read must not wake the runtime's monitor thread. Anything else (a
// terminal, a file, a socket) is os.Stdin.
func ProtocolStdin() io.ReadCloser {
	f := reopenPipe(0, unix.O_RDONLY, "/dev/stdin")
	if f == nil {
		return os.Stdin
	}
	return rawFile{f, rawio.Of(f)}
}

// ProtocolStdout is out, the protocol's stdout (ReserveStdout), for a
// session's answers: where it is a pipe, a description of its own,
// non-blocking, written with raw system calls as ProtocolStdin is read
// (a full pipe then parks the writing goroutine, not a thread). Anything
// else is out.
func ProtocolStdout(out *os.File) io.Writer {
	f := reopenPipe(int(out.Fd()), unix.O_WRONLY, "/dev/stdout")
	if f == nil {
		return out
	}
	return rawFile{f, rawio.Of(f)}
}

// ProtocolStderr is stderr for a session's log (a line per call), made
// as ProtocolStdout is; anything but a pipe is os.Stderr.
func ProtocolStderr() io.Writer {
	f := reopenPipe(2, unix.O_WRONLY, "/dev/stderr")
	if f == nil {
		return os.Stderr
	}
	return rawFile{f, rawio.Of(f)}
}

// reopenPipe opens the pipe on fd again, non-blocking, for mode (a new
// open file description: fd's own keeps its mode); nil when fd is not a
// pipe or cannot be opened again.
func reopenPipe(fd, mode int, name string) *os.File {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return nil
	}
	nfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), mode|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	var again unix.Stat_t
	if unix.Fstat(nfd, &again) != nil || again.Dev != st.Dev || again.Ino != st.Ino {
		// Not the same pipe (fd changed under us): not ours.
		_ = unix.Close(nfd)
		return nil
	}
	// A non-blocking descriptor: os.NewFile puts it on the poller.
	return os.NewFile(uintptr(nfd), name+" (fd "+strconv.Itoa(nfd)+")")
}

// rawFile is a pipe of the protocol read or written through its raw side
// (when it has one: a descriptor the poller took).
type rawFile struct {
	*os.File
	raw *rawio.FD
}

func (f rawFile) Read(p []byte) (int, error) {
	if f.raw == nil {
		return f.File.Read(p)
	}
	return f.raw.Read(p)
}

func (f rawFile) Write(p []byte) (int, error) {
	if f.raw == nil {
		return f.File.Write(p)
	}
	return f.raw.Write(p)
}
