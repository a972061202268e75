package term

import (
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// A pipe on stdin is read through a description of its own, non-blocking
// (on the poller), to the client's last byte and its end; stdin's own
// description keeps its blocking mode.
func TestProtocolStdinOfAPipe(t *testing.T) {
	saved, err := unix.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Dup3(saved, 0, 0); _ = unix.Close(saved) })
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup3(int(r.Fd()), 0, 0); err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	in := ProtocolStdin()
	if in == os.Stdin {
		t.Fatal("a pipe on stdin is read as os.Stdin (blocking)")
	}
	defer in.Close()
	if fl, _ := unix.FcntlInt(0, unix.F_GETFL, 0); fl&unix.O_NONBLOCK != 0 {
		t.Error("stdin's own description was made non-blocking")
	}
	go func() {
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0"}` + "\n"))
		_ = w.Close()
	}()
	got, err := io.ReadAll(in)
	if err != nil || string(got) != `{"jsonrpc":"2.0"}`+"\n" {
		t.Errorf("read %q, %v", got, err)
	}
}

// The protocol's stdout, a pipe, is written through a description of its
// own, non-blocking: every byte of an answer larger than the pipe
// arrives while the client reads slowly, and the description pml was
// given keeps its blocking mode. A file is written as it is.
func TestProtocolStdoutOfAPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// What ReserveStdout gives: a blocking descriptor of the pipe.
	fd, err := unix.Dup(int(w.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	given := os.NewFile(uintptr(fd), "given")
	out := ProtocolStdout(given)
	if out == io.Writer(given) {
		t.Fatal("a pipe is written as the blocking description pml was given")
	}
	if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); fl&unix.O_NONBLOCK != 0 {
		t.Error("the given description was made non-blocking")
	}
	want := make([]byte, 300_000)
	for i := range want {
		want[i] = byte('a' + i%26)
	}
	done := make(chan error, 1)
	go func() {
		n, err := out.Write(want)
		if err == nil && n != len(want) {
			err = io.ErrShortWrite
		}
		// Every writer of the pipe closes: the reader then sees its end.
		out.(io.Closer).Close()
		given.Close()
		done <- err
	}()
	got, err := io.ReadAll(r)
	if err != nil || string(got) != string(want) {
		t.Fatalf("read %d of %d bytes: %v", len(got), len(want), err)
	}
	if err := <-done; err != nil {
		t.Fatalf("writing: %v", err)
	}
	f, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ProtocolStdout(f) != io.Writer(f) {
		t.Error("a file is not written as it is")
	}
}
