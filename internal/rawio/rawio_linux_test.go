//go:build linux

package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// nonblockingPipe is a pipe whose both ends the poller holds.
func nonblockingPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w = os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// Every byte written through the raw side arrives, in order, past a
// full pipe (the writer waits on the poller while the reader is slow),
// and the end of the stream reads as io.EOF.
func TestRawPipeCarriesEveryByteToTheEnd(t *testing.T) {
	r, w := nonblockingPipe(t)
	rr, rw := Of(r), Of(w)
	if rr == nil || rw == nil {
		t.Fatal("a non-blocking pipe has no raw side")
	}
	// Four times a pipe's default capacity: the writer must wait.
	want := bytes.Repeat([]byte("0123456789abcdef"), 4*65536/16)
	werr := make(chan error, 1)
	go func() {
		n, err := rw.Write(want)
		if err == nil && n != len(want) {
			err = io.ErrShortWrite
		}
		w.Close()
		werr <- err
	}()
	time.Sleep(20 * time.Millisecond) // the pipe fills
	got, err := io.ReadAll(rr)
	if err != nil {
		t.Fatalf("reading: %v", err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("writing: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, wrote %d (or not the same)", len(got), len(want))
	}
	if n, err := rr.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("after the end: %d, %v; want 0, io.EOF", n, err)
	}
}

// A blocking descriptor has no raw side: a raw read of it would hold a
// thread and its processor.
func TestABlockingDescriptorHasNoRawSide(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	// os.Pipe's ends are non-blocking on the poller; made blocking, as
	// an inherited stdin is.
	for _, f := range []*os.File{r, w} {
		rc, _ := f.SyscallConn()
		_ = rc.Control(func(fd uintptr) { _ = unix.SetNonblock(int(fd), false) })
		if Of(f) != nil {
			t.Errorf("%s: a blocking descriptor has a raw side", f.Name())
		}
	}
}

// Close and a deadline end a read that waits, as they end the
// descriptor's own.
func TestCloseAndDeadlineEndAWaitingRead(t *testing.T) {
	r, _ := nonblockingPipe(t)
	raw := Of(r)
	if err := r.SetReadDeadline(time.Now().Add(30 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("past the deadline: %v", err)
	}
	_ = r.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := raw.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	r.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the waiting read")
	}
}

// A unix socket, the server's stdin and stdout: a request out and an
// answer back, then a write to a peer that is gone fails with EPIPE
// (and the process lives: the runtime ignores SIGPIPE off fd 1 and 2).
func TestRawSocketBothWaysAndAPeerGone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan *net.UnixConn, 1)
	go func() {
		c, err := ln.AcceptUnix()
		if err != nil {
			peer <- nil
			return
		}
		line := make([]byte, 64)
		n, _ := c.Read(line)
		_, _ = c.Write(append([]byte("re: "), line[:n]...))
		peer <- c
	}()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw := Of(c)
	if raw == nil {
		t.Fatal("a unix socket has no raw side")
	}
	if _, err := raw.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := raw.Read(buf)
	if err != nil || string(buf[:n]) != "re: ping\n" {
		t.Fatalf("answer %q, %v", buf[:n], err)
	}
	p := <-peer
	if p == nil {
		t.Fatal("no peer")
	}
	p.Close()
	if n, err := raw.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("from a closed peer: %d, %v; want io.EOF", n, err)
	}
	var werr error
	for i := 0; i < 100 && werr == nil; i++ {
		_, werr = raw.Write([]byte("more\n"))
	}
	if !errors.Is(werr, unix.EPIPE) && !errors.Is(werr, unix.ECONNRESET) {
		t.Fatalf("writing to a peer that is gone: %v; want EPIPE", werr)
	}
}

// WriteFile appends all of a line to a regular file; Fstat sees it.
func TestWriteFileAndFstat(t *testing.T) {
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rc, _ := f.SyscallConn()
	var st unix.Stat_t
	var n int
	var werr, serr error
	_ = rc.Control(func(fd uintptr) {
		n, werr = WriteFile(fd, []byte("one line\n"))
		serr = Fstat(fd, &st)
	})
	if werr != nil || n != 9 || serr != nil || st.Size != 9 {
		t.Fatalf("wrote %d (%v), size %d (%v)", n, werr, st.Size, serr)
	}
	if err := Fstat(^uintptr(0), &st); !errors.Is(err, unix.EBADF) {
		t.Fatalf("fstat of no descriptor: %v", err)
	}
}

// PollNow answers at once: nothing ready, then the one event.
func TestPollNow(t *testing.T) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ep)
	r, w := nonblockingPipe(t)
	rc, _ := r.SyscallConn()
	_ = rc.Control(func(fd uintptr) {
		err = unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, int(fd), &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
	})
	if err != nil {
		t.Fatal(err)
	}
	events := make([]unix.EpollEvent, 2)
	if n, err := PollNow(ep, events); n != 0 || err != nil {
		t.Fatalf("nothing written: %d, %v", n, err)
	}
	_, _ = w.Write([]byte("x"))
	if n, err := PollNow(ep, events); n != 1 || err != nil {
		t.Fatalf("one byte written: %d, %v", n, err)
	}
	if n, err := PollNow(ep, nil); n != 0 || err != nil {
		t.Fatalf("no room for events: %d, %v", n, err)
	}
}
