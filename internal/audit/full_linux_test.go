package audit

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// ext4Disk mounts a loop-mounted ext4 file system of size bytes on a
// temporary directory (root, mkfs.ext4 and loop devices needed) and
// returns it; the mount goes at the end of the test. fallocate on ext4
// allocates extents, where tmpfs allocates pages.
func ext4Disk(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a loop device needs root; CI runs this as root")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4 here")
	}
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a loop device here: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
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
	tk, err := l.Ready()
	if err != nil {
		t.Fatal(err)
	}
	fill(t, disk)
	if err := tk.Record(Entry{Tool: "toolbox:write_file", Decision: Allowed, ExitStatus: "error"}); err != nil {
		t.Fatalf("the entry of the call admitted before the disk filled: %v", err)
	}
	// Each call checks first: calls go on while the reserve lasts, then
	// are refused, and every call that went on has its entry, whole.
	ran := 1
	for ; ran < 10000; ran++ {
		tk, err := l.Ready()
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
		if err := tk.Record(Entry{Tool: "toolbox:write_file", Decision: Allowed, ExitStatus: "error"}); err != nil {
			t.Fatalf("entry %d on a full disk, after Ready: %v", ran, err)
		}
	}
	got, bad := readAll(t, path)
	if len(got) != ran || len(bad) != 0 || ran < (Reserve-MaxEntry)/200 || ran == 10000 || l.Held() != 0 {
		t.Errorf("%d calls ran, %d entries, bad lines %+v, %d bytes still held", ran, len(got), bad, l.Held())
	}

	other := filepath.Join(disk, "other", ".pml", "audit.jsonl")
	if err := os.MkdirAll(filepath.Dir(other), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = New(other).Ready()
	var we *WriteError
	if !errors.As(err, &we) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "free space") {
		t.Errorf("Ready on a full disk: %v", err)
	}
	if err := Probe(other); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Probe on a full disk: %v", err)
	}
}

// Calls that come together on a disk filled to its last byte (issue 51):
// each admitted call holds room for its entry until it is written, so
// the calls admitted are those whose entries fit, all of them written,
// and every other is refused with ENOSPC. Before, every call checked the
// same reserve and nothing counted the calls in flight: a burst
// overflowed it, and the entries past it failed after their calls ran.
func TestABurstOnAFullDiskWritesTheEntryOfEveryCallItAdmits(t *testing.T) {
	t.Run("tmpfs", func(t *testing.T) { burstOnAFullDisk(t, smallDisk(t, "256k")) })
	t.Run("ext4", func(t *testing.T) { burstOnAFullDisk(t, ext4Disk(t, 4<<20)) })
}

func burstOnAFullDisk(t *testing.T, disk string) {
	path := filepath.Join(disk, ".pml", "audit.jsonl")
	l := New(path)
	defer l.Close()
	tk, err := l.Ready()
	if err != nil {
		t.Fatal(err)
	}
	tk.Release()
	fill(t, disk)

	const calls = 400
	var (
		wg               sync.WaitGroup
		start            = make(chan struct{})
		admitted, failed atomic.Int64
		refused          atomic.Int64
	)
	// The entries are about as long as a real call's with many argument
	// names; each waits for the whole burst to be admitted or refused
	// before it writes, the worst order for the reserve.
	keys := make([]string, MaxArgKeys)
	for i := range keys {
		keys[i] = strings.Repeat("k", 20) + strconv.Itoa(i)
	}
	var decided sync.WaitGroup
	decided.Add(calls)
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tk, err := l.Ready()
			decided.Done()
			if err != nil {
				if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "free space") {
					t.Errorf("refused with %v", err)
				}
				refused.Add(1)
				return
			}
			admitted.Add(1)
			decided.Wait()
			if err := tk.Record(Entry{Tool: "toolbox:write_file", Decision: Allowed, ExitStatus: "ok", ArgKeys: keys}); err != nil {
				failed.Add(1)
				t.Errorf("an admitted call's entry: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	got, bad := readAll(t, path)
	t.Logf("%d admitted, %d refused, %d entries", admitted.Load(), refused.Load(), len(got))
	if int64(len(got)) != admitted.Load() || len(bad) != 0 || failed.Load() != 0 || admitted.Load()+refused.Load() != calls || refused.Load() == 0 || admitted.Load() == 0 || l.Held() != 0 {
		t.Errorf("%d admitted, %d refused, %d entries, %d failed, bad lines %v, %d bytes still held", admitted.Load(), refused.Load(), len(got), failed.Load(), bad, l.Held())
	}

	// An entry of no call (an egress connection) does not take the room
	// held for calls in flight: with one call admitted, it is refused once
	// only that call's room is left, and the call's entry is written.
	var tks []*Ticket
	for {
		tk, err := l.Ready()
		if err != nil {
			break
		}
		tks = append(tks, tk)
	}
	if len(tks) == 0 {
		t.Fatal("no call admitted after the burst")
	}
	for err := error(nil); err == nil; {
		err = l.Record(Entry{Tool: "net", Decision: Allowed, Net: &Net{Host: "example.com", Port: 443}})
		if err != nil && !errors.Is(err, syscall.ENOSPC) {
			t.Fatal(err)
		}
	}
	for i, tk := range tks {
		if err := tk.Record(Entry{Tool: "toolbox:write_file", Decision: Allowed, ExitStatus: "ok", ArgKeys: keys}); err != nil {
			t.Errorf("call %d of %d, after entries of no call: %v", i, len(tks), err)
		}
	}
	if _, bad := readAll(t, path); len(bad) != 0 || l.Held() != 0 {
		t.Errorf("bad lines %v, %d bytes held", bad, l.Held())
	}
}
