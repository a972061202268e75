//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Pinned tool definitions on a full disk (issue 56 with issue 40's
// faults): accepting a changed definition whose pin cannot be written
// says so, pins nothing and changes neither the pins nor .pml.lock; the
// tool stays held, and once there is room the same step works.
func TestAcceptingADriftOnAFullDiskChangesNothing(t *testing.T) {
	ws := pinnedWorkspace(t, honestNote)
	state := t.TempDir()
	env := []string{"XDG_STATE_HOME=" + state}
	run := func(args ...string) cliResult { return runCLI(t, ws.Dir, env, "", args...) }
	if r := run("trust", "--yes"); r.code != 0 {
		t.Fatalf("pml trust --yes: %d\n%s", r.code, r.stderr)
	}
	if r := run("call", "probe:note", `{"text": "hi"}`); r.code != 0 || !strings.Contains(string(r.stdout), "ran note") {
		t.Fatalf("the first call, which pins probe:note: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	ws.write("defs.json", poisonedNote)
	if r := run("call", "probe:note", `{"text": "hi"}`); r.code != 3 {
		t.Fatalf("the changed probe:note was not held: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	// The pins' directory on a disk of its own, with what it held, full.
	pins := filepath.Join(state, "pml", "toolpins")
	saved := readDir(t, pins)
	if len(saved) == 0 {
		t.Fatalf("no pins were written in %s", pins)
	}
	mountSmall(t, pins, "64k")
	if err := os.Chown(pins, os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pins, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range saved {
		if err := os.WriteFile(filepath.Join(pins, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lock, _ := os.ReadFile(ws.path(".pml.lock"))
	filler := filepath.Join(pins, "filler")
	fillDisk(t, filler)

	if r := run("call", "probe:note", `{"text": "hi"}`); r.code != 3 || strings.Contains(string(r.stdout), "ran note") {
		t.Errorf("on a full disk probe:note is not held: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r := run("lock", "--accept", "probe:note")
	out := string(r.stdout) + string(r.stderr)
	if r.code == 0 || !strings.Contains(out, "no space left on device") {
		t.Errorf("pml lock --accept on a full disk: exit %d, want a failure that says the disk is full:\n%s", r.code, out)
	}
	now := readDir(t, pins)
	delete(now, "filler")
	for name, b := range saved {
		if string(now[name]) != string(b) {
			t.Errorf("the pins' %s changed on a full disk:\nbefore: %s\nafter: %s", name, b, now[name])
		}
	}
	for name := range now {
		if _, ok := saved[name]; !ok && !strings.HasSuffix(name, ".lock") {
			t.Errorf("a file was left in the pins' directory on a full disk: %s", name)
		}
	}
	if b, _ := os.ReadFile(ws.path(".pml.lock")); string(b) != string(lock) {
		t.Errorf("a failed accept changed .pml.lock:\n%s", b)
	}
	if r := run("call", "probe:note", `{"text": "hi"}`); r.code != 3 || strings.Contains(string(r.stdout), "ran note") {
		t.Errorf("after a failed accept probe:note is not held: exit %d\n%s", r.code, r.stdout)
	}

	// Room again: the same step pins it, and it runs.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if r := run("lock", "--accept", "probe:note"); r.code != 0 {
		t.Fatalf("pml lock --accept with room: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := run("call", "probe:note", `{"text": "hi"}`); r.code != 0 || !strings.Contains(string(r.stdout), "ran note") {
		t.Errorf("the accepted probe:note: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// readDir is the regular files of dir by name.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	return m
}
