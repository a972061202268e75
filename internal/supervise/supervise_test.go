package supervise

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func run(t *testing.T, req []byte) (int, string, string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the supervisor runs in Linux containers only")
	}
	wd, _ := os.Getwd()
	t.Cleanup(func() { _ = os.Chdir(wd) })
	var out, errb bytes.Buffer
	code := Shell(bytes.NewReader(req), &out, &errb)
	return code, out.String(), errb.String()
}

func TestTheCommandRunsInItsDirectoryWithItsExitCode(t *testing.T) {
	dir := t.TempDir()
	code, out, _ := run(t, Request(time.Minute, dir, "pwd; echo line2\nexit 7"))
	if code != 7 || out != dir+"\nline2\n" {
		t.Fatalf("code %d, out %q", code, out)
	}
}

// TestTheDeadlineEndsTheCommandAndWhatItStarted: a command that outlives
// its deadline (and a background child that would outlive it) is killed.
func TestTheDeadlineEndsTheCommandAndWhatItStarted(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "late")
	code, _, stderr := run(t, Request(300*time.Millisecond, dir, "(sleep 2; touch late) & sleep 30"))
	if code != ExitDeadline || !strings.Contains(stderr, "deadline") {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
	// The background child was in the command's group: it is gone, so
	// the marker never appears. Waiting past its sleep is the only way
	// to see that it did not run.
	time.Sleep(2500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a child of the command outlived the deadline")
	}
}

func TestAnIncompleteRequestRunsNothing(t *testing.T) {
	for _, req := range []string{"", "1000\n", "x\n/\ntrue", "0\n/\ntrue"} {
		if code, _, _ := run(t, []byte(req)); code != ExitBadRequest {
			t.Errorf("%q: code %d", req, code)
		}
	}
	if code, _, stderr := run(t, Request(time.Second, "/nonexistent-dir", "true")); code != ExitBadRequest || !strings.Contains(stderr, "working directory") {
		t.Errorf("missing directory: code %d %q", code, stderr)
	}
}

func link(t *testing.T, deadline time.Duration, stdin io.Reader, argv ...string) (int, string, string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the supervisor runs in Linux containers only")
	}
	var out, errb bytes.Buffer
	code := Link(deadline, argv, stdin, &out, &errb)
	return code, out.String(), errb.String()
}

// A program that talks over stdin gets it, and its own exit code is
// passed on.
func TestLinkPassesStdinAndTheExitCode(t *testing.T) {
	code, out, _ := link(t, time.Minute, strings.NewReader("hello\n"), "/bin/sh", "-c", "read l; echo got $l; exit 3")
	if code != 3 || out != "got hello\n" {
		t.Fatalf("code %d, out %q", code, out)
	}
}

// When pml's end of stdin is gone, a program that ignores it (it spins,
// reads nothing) is ended after the grace, far before its deadline.
func TestLinkEndsAProgramWhosePMLIsGone(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the supervisor runs in Linux containers only")
	}
	r, w := io.Pipe()
	type res struct {
		code   int
		stderr string
	}
	got := make(chan res, 1)
	go func() {
		code, _, stderr := link(t, time.Hour, r, "/bin/sh", "-c", "sleep 3600")
		got <- res{code, stderr}
	}()
	w.Close()
	select {
	case g := <-got:
		if g.code != ExitDeadline || !strings.Contains(g.stderr, "gone") {
			t.Fatalf("code %d, stderr %q", g.code, g.stderr)
		}
	case <-time.After(time.Minute):
		t.Fatal("the program outlived pml's end of its stdin")
	}
}

// The deadline ends a program even while pml's end is still open.
func TestLinkDeadline(t *testing.T) {
	r, w := io.Pipe()
	defer w.Close()
	code, _, stderr := link(t, 300*time.Millisecond, r, "/bin/sh", "-c", "sleep 3600")
	if code != ExitDeadline || !strings.Contains(stderr, "deadline") {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
}

func TestParseLink(t *testing.T) {
	d, argv, err := ParseLink(LinkArgs(1500*time.Millisecond, "deno", "run", "x")[2:])
	if err != nil || d != 1500*time.Millisecond || strings.Join(argv, " ") != "deno run x" {
		t.Fatalf("%v %v %v", d, argv, err)
	}
	for _, bad := range [][]string{nil, {"10"}, {"10", "x", "deno"}, {"0", "--", "deno"}, {"x", "--", "deno"}} {
		if _, _, err := ParseLink(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
