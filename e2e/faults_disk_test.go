//go:build linux

package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The workspace on a full disk (issue 40): a write that does not fit
// leaves the file as it was, a call whose audit entry cannot be written
// does not run, and the audit log stays valid JSONL throughout. The
// disks are small tmpfs mounts of the test's own, so root is needed; CI
// runs the e2e suite as root.

// mountSmall mounts a tmpfs of size (mount(8) units: 2m) on dir, owned
// by the workspace's user, and unmounts it at the end of the test (after
// the sessions that use it have closed: cleanups run last first).
func mountSmall(t *testing.T, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the disk-full faults mount a small tmpfs, which needs root; CI runs them as root")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		t.Fatalf("mounting a %s tmpfs on %s: %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	if err := os.Chown(dir, testUID, testUID); err != nil {
		t.Fatal(err)
	}
}

// fillDisk writes name until its file system is full; the file stays.
func fillDisk(t *testing.T, name string) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", name, err)
			}
			// What is left is less than a page: a byte at a time.
			for {
				if _, err := f.Write(buf[:1]); err != nil {
					return
				}
			}
		}
	}
}

// validJSONL fails the test unless every line of the audit log at path is
// one JSON object with a decision, ended by a newline; it returns them.
func validJSONL(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Errorf("%s does not end with a newline:\n%s", path, data)
	}
	var out []map[string]any
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" && len(data) == 0 {
			break
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil || e["decision"] == nil {
			t.Errorf("line %d of %s is not an entry (%v): %q", i+1, path, err, line)
			continue
		}
		out = append(out, e)
	}
	return out
}

// A write that overflows the disk fails with the cause and leaves the
// file byte for byte as it was (and no temporary file); a command that
// fills the disk while it runs still gets its audit entry (the room the
// audit log reserved before the call); the log stays valid JSONL and
// pml audit reads it.
func TestAWriteThatOverflowsTheDiskLeavesTheFileAsItWas(t *testing.T) {
	ws := newWorkspace(t, "")
	mountSmall(t, ws.Dir, "2m")
	ws.write(".pml.json", `{"permissions": {"allow": ["filesystem:*", "shell:*"]}}`)
	before := make([]byte, 100<<10)
	if _, err := rand.Read(before); err != nil {
		t.Fatal(err)
	}
	target := ws.write("target.bin", string(before))
	ws.write("small.txt", "small")
	s := startSession(t, ws)

	if out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a-missing-file"}); !res.IsError {
		t.Fatalf("reading a missing file: %s", out)
	}
	big := strings.Repeat("x", 3<<20)
	out, res := s.call(t, "filesystem:write_file", map[string]any{"path": "target.bin", "content": big})
	if !res.IsError || !strings.Contains(out, "no space left on device") {
		t.Errorf("a 3 MiB write on a 2 MiB disk: error %v: %s", res.IsError, out)
	}
	if after, err := os.ReadFile(target); err != nil || !bytes.Equal(after, before) {
		t.Errorf("the target changed: %d bytes (was %d), %v", len(after), len(before), err)
	}
	if left, _ := filepath.Glob(ws.path(".pml-write-*")); len(left) != 0 {
		t.Errorf("the failed write left %v", left)
	}

	// The command fills the disk and leaves it full; its entry is written
	// after it ends, into the room reserved before it ran.
	out, _ = s.call(t, "shell:exec", map[string]any{"command": "head -c 4194304 /dev/zero > filler; echo exit $?"})
	if !strings.Contains(out, "exit 1") {
		t.Errorf("the filling command: %s", out)
	}
	// What the command's last write left (a part of a page) is filled too.
	fillDisk(t, ws.path("filler"))
	var st syscall.Statfs_t
	if err := syscall.Statfs(ws.Dir, &st); err != nil || st.Bfree != 0 {
		t.Errorf("the disk is not full after the command: %d blocks free, %v", st.Bfree, err)
	}

	// On the full disk, calls go on while the reserve lasts, each with its
	// entry: 60 of them fill more than two pages of the log, which the disk
	// could not give. (Before, an entry that needed a new page was cut
	// short there, and the next one glued to it.)
	const reads = 60
	for i := 0; i < reads; i++ {
		if out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "small.txt"}); res.IsError || out != "small" {
			t.Fatalf("read %d on the full disk: %s", i, out)
		}
	}

	es := validJSONL(t, ws.path(".pml/audit.jsonl"))
	var tools []string
	for _, e := range es[:min(3, len(es))] {
		tools = append(tools, e["tool"].(string)+" "+e["exit_status"].(string))
	}
	if strings.Join(tools, ",") != "filesystem:read_file error,filesystem:write_file error,shell:exec ok" || len(es) != 3+reads {
		t.Errorf("audit entries: %d, the first %v", len(es), tools)
	}
	code, _, errOut := runPML(t, ws, "audit", "--format", "json")
	if got := auditJSON(t, ws); code != 0 || len(got) != 3+reads || strings.Contains(errOut, "line") {
		t.Errorf("pml audit: exit %d, %d entries, stderr %q", code, len(got), errOut)
	}
}

// With .pml/ full, a call is refused before it runs: the client hears it,
// with the audit log's path, the cause and the fix, and the command's
// effect (an empty file, which a full tmpfs still takes) is not there.
// pml doctor says the same. Once .pml/ has room again, calls run and the
// log is valid JSONL.
func TestACallWhoseAuditEntryCannotBeWrittenDoesNotRun(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:*", "shell:*"]}}`)
	s := startSession(t, ws)
	if out, res := s.call(t, "shell:exec", map[string]any{"command": "echo before"}); res.IsError {
		t.Fatalf("a call before: %s", out)
	}

	// .pml/ on a disk of its own, full; the workspace beside it has room.
	pml := ws.path(".pml")
	mountSmall(t, pml, "64k")
	fillDisk(t, filepath.Join(pml, "filler"))
	if err := os.WriteFile(filepath.Join(pml, "empty-file-fits"), nil, 0o644); err != nil {
		t.Fatalf("an empty file on the full tmpfs: %v", err)
	}
	logPath := filepath.Join(pml, "audit.jsonl")

	out, res := s.call(t, "shell:exec", map[string]any{"command": "touch .pml/marker ran-marker"})
	for _, want := range []string{"did not run shell:exec", logPath, "no space left on device", "free space", "pml doctor"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal does not say %q: %s", want, out)
		}
	}
	if !res.IsError {
		t.Errorf("the refusal is not an error result: %s", out)
	}
	for _, p := range []string{ws.path("ran-marker"), filepath.Join(pml, "marker")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the refused command ran: %s: %v", p, err)
		}
	}
	if !s.logs("refused the call: its audit entry cannot be written") {
		t.Errorf("pml's log does not say it refused:\n%s", s.stderr.String())
	}
	// pml call refuses it the same way: exit 5 (unavailable), with why.
	code, cout, cerr := runPML(t, ws, "call", "shell:exec", `{"command": "touch ran-by-pml-call"}`)
	if code != 5 || !strings.Contains(cout+cerr, logPath) || !strings.Contains(cout+cerr, "no space left on device") {
		t.Errorf("pml call with .pml/ full: exit %d\n%s\n%s", code, cout, cerr)
	}
	if _, err := os.Stat(ws.path("ran-by-pml-call")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pml call ran the refused command: %v", err)
	}
	code, dout, _ := runPML(t, ws, "doctor")
	if code != 1 || !strings.Contains(dout, "[FAIL] audit log") || !strings.Contains(dout, "free space") {
		t.Errorf("pml doctor on a full .pml/: exit %d\n%s", code, dout)
	}
	validJSONL(t, logPath)

	// Room again (the full disk goes away): calls run and are recorded.
	if err := syscall.Unmount(pml, 0); err != nil {
		t.Fatal(err)
	}
	if out, res := s.call(t, "shell:exec", map[string]any{"command": "echo after"}); res.IsError || !strings.Contains(out, "after") {
		t.Fatalf("a call after: %s", out)
	}
	es := validJSONL(t, logPath)
	if len(es) != 2 || es[0]["tool"] != "shell:exec" || es[1]["tool"] != "shell:exec" {
		t.Errorf("entries: %v", es)
	}
	if got := auditJSON(t, ws); len(got) != 2 {
		t.Errorf("pml audit: %d entries", len(got))
	}
}
