package supervise

import (
	"bytes"
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
