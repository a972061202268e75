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
