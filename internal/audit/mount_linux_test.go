package audit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A file system mounted over .pml/ between two entries (inotify sees no
// event for it): the next entry goes to the log the path names now, on
// the new file system, not to the file now hidden under the mount.
func TestAKeptFileIsDroppedWhenAFileSystemIsMountedOverThePath(t *testing.T) {
	ws := t.TempDir()
	dir := filepath.Join(ws, ".pml")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l := New(filepath.Join(dir, "audit.jsonl"))
	t.Cleanup(func() { _ = l.Close() })
	// Two entries: the second finds the path as the first left it
	// (the log's creation is an event the second reads).
	for _, tool := range []string{"a:one", "a:one"} {
		if err := l.Record(Entry{Tool: tool, Decision: Allowed}); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): root in a namespace that may mount is needed", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	if err := l.Record(Entry{Tool: "a:two", Decision: Allowed}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(l.Path()); !strings.Contains(string(b), "a:two") || strings.Contains(string(b), "a:one") {
		t.Errorf("the log on the mounted file system holds %q", b)
	}
	_ = l.Close() // it holds the log on the tmpfs open
	if err := syscall.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(l.Path()); strings.Contains(string(b), "a:two") {
		t.Errorf("the entry after the mount went to the file under it: %q", b)
	}
}
