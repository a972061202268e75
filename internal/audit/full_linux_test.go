package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// smallDisk mounts a tmpfs of size bytes on a temporary directory (root
// only) and returns it; the mount goes at the end of the test.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root; CI runs this as root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes to dir until its file system is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// Ready reserves room for the entries to come: a disk that fills after
// it still takes the entry. On a disk already full, Ready refuses, naming
// the log, the cause and the fix; nothing of an entry is written.
func TestTheReserveTakesTheEntryOnAFullDisk(t *testing.T) {
	disk := smallDisk(t, "256k")
	path := filepath.Join(disk, ".pml", "audit.jsonl")
	l := New(path)
	defer l.Close()
	if err := l.Ready(); err != nil {
		t.Fatal(err)
	}
	fill(t, disk)
	for i := 0; i < 20; i++ {
		if err := l.Record(Entry{Tool: "toolbox:write_file", Decision: Allowed, ExitStatus: "error"}); err != nil {
			t.Fatalf("entry %d on a full disk, after Ready: %v", i, err)
		}
	}
	// Each call checks first: calls go on while the reserve lasts, then
	// are refused, and every call that went on has its entry, whole.
	ran := 20
	for ; ran < 10000; ran++ {
		if err := l.Ready(); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
		if err := l.Record(Entry{Tool: "toolbox:write_file", Decision: Allowed, ExitStatus: "error"}); err != nil {
			t.Fatalf("entry %d on a full disk, after Ready: %v", ran, err)
		}
	}
	got, bad := readAll(t, path)
	if len(got) != ran || len(bad) != 0 || ran < (Reserve-MinRoom)/200 || ran == 10000 {
		t.Errorf("%d calls ran, %d entries, bad lines %+v", ran, len(got), bad)
	}

	other := filepath.Join(disk, "other", ".pml", "audit.jsonl")
	if err := os.MkdirAll(filepath.Dir(other), 0o700); err != nil {
		t.Fatal(err)
	}
	err := New(other).Ready()
	var we *WriteError
	if !errors.As(err, &we) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "free space") {
		t.Errorf("Ready on a full disk: %v", err)
	}
	if err := Probe(other); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Probe on a full disk: %v", err)
	}
}
