//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAnAuditLogSwappedBetweenWarmCallsIsNeverFollowed: pml keeps the
// audit log open between calls and looks at its path again only when a
// watch on it saw a change (internal/audit: pathWatch). Between two calls
// of a warm session (a pooled server, the fast path), the log, then
// .pml/ itself, is swapped for a link to a file outside the workspace:
// the next call is refused, not run, and the outside file is untouched;
// the log back in place, calls are audited in it again. A container that
// may write the workspace cannot make the swap at all (.pml/ is mounted
// read-only into it, and is a mount point it cannot rename).
func TestAnAuditLogSwappedBetweenWarmCallsIsNeverFollowed(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, ""))
	outside, victim := outsideFiles(t, ws)
	want, _ := os.ReadFile(victim)
	// A directory that, put in place of .pml/, holds a log of its own.
	fakeDir := filepath.Join(outside, "fake-pml")
	if err := os.MkdirAll(fakeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	fakeLog := filepath.Join(fakeDir, "audit.jsonl")
	if err := os.WriteFile(fakeLog, []byte("not pml's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startSession(t, ws)
	echo := func(text string) (string, bool) {
		out, res := s.call(t, "probe:echo", map[string]any{"text": text})
		return out, res.IsError
	}
	entries := func() int {
		b, _ := os.ReadFile(ws.path(".pml/audit.jsonl"))
		return strings.Count(string(b), `"tool":"probe:echo"`)
	}
	// A call's entry is written just after its answer (the fast path
	// answers first): each swap below comes after the entries are in.
	audited := func(n int) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%d entries of probe:echo in the log", n), hostileBound, func() bool { return entries() == n })
	}
	for i := 0; i < 5; i++ {
		if out, failed := echo("warm"); failed {
			t.Fatalf("warm call: %q", out)
		}
	}
	audited(5)

	// From inside a container: every way to swap them fails.
	out, res := s.call(t, "shell:exec", map[string]any{"command": `
mv .pml/audit.jsonl .pml/gone 2>/dev/null; echo "rename-log=$?"
ln -sf ../../outside/bashrc .pml/audit.jsonl 2>/dev/null; echo "link-log=$?"
mv .pml .pml-gone 2>/dev/null; echo "rename-dir=$?"
rm -rf .pml 2>/dev/null; echo "remove-dir=$?"`})
	if res.IsError {
		t.Fatalf("shell:exec: %q", out)
	}
	for _, step := range []string{"rename-log", "link-log", "rename-dir", "remove-dir"} {
		if strings.Contains(out, step+"=0") {
			t.Errorf("a container did %s: %q", step, out)
		}
	}
	before := entries()
	if out, failed := echo("after the container"); failed {
		t.Fatalf("a call after the container's attempts: %q", out)
	}
	audited(before + 1)

	// On the host (a checkout, another program of the person's): the
	// log replaced by a link between two warm calls.
	if err := os.Rename(ws.path(".pml/audit.jsonl"), ws.path(".pml/audit.old")); err != nil {
		t.Fatal(err)
	}
	symlink(t, ws, victim, ".pml/audit.jsonl")
	if out, failed := echo("through the link"); !failed || !strings.Contains(out, "did not run") || !strings.Contains(out, "symbolic link") {
		t.Errorf("the call after the log became a link: %q", out)
	}
	unchanged(t, victim, want)
	old, _ := os.ReadFile(ws.path(".pml/audit.old"))
	if strings.Contains(string(old), "through the link") || strings.Count(string(old), `"tool":"probe:echo"`) != before+1 {
		t.Errorf("the log moved away took an entry after the swap:\n%s", old)
	}
	// The link gone: the next call starts a new log at the path.
	if err := os.Remove(ws.path(".pml/audit.jsonl")); err != nil {
		t.Fatal(err)
	}
	if out, failed := echo("log back"); failed {
		t.Fatalf("a call with the link removed: %q", out)
	}
	audited(1)

	// .pml/ replaced by a link to a directory with a log of its own.
	if err := os.Rename(ws.path(".pml"), ws.path(".pml-real")); err != nil {
		t.Fatal(err)
	}
	symlink(t, ws, fakeDir, ".pml")
	if out, failed := echo("through the directory link"); !failed || !strings.Contains(out, "did not run") || !strings.Contains(out, "symbolic link") {
		t.Errorf("the call after .pml/ became a link: %q", out)
	}
	unchanged(t, victim, want)
	unchanged(t, fakeLog, []byte("not pml's\n"))
	if err := os.Remove(ws.path(".pml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ws.path(".pml-real"), ws.path(".pml")); err != nil {
		t.Fatal(err)
	}
	before = entries()
	if out, failed := echo(".pml back"); failed {
		t.Fatalf("a call with .pml/ back: %q", out)
	}
	audited(before + 1)
	unchanged(t, fakeLog, []byte("not pml's\n"))
}
