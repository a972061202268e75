package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/cmd/pml/internal/doctor"
	"github.com/pml-dev/pml/internal/deps"
)

// lockWorkspace is a workspace whose .pml/deps.json records everything's
// @scope/server at 1.2.3, installed as installed(version, integrity)
// makes it.
func lockWorkspace(t *testing.T) (ws string, installed func(version, integrity string)) {
	t.Helper()
	ws = t.TempDir()
	t.Setenv("PML_WORKSPACE", ws)
	write := func(rel, content string) {
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".pml/deps.json", `{"servers": {"everything": {"spec": "x", "integrity": "sha512-AAAA", "version": "1.2.3", "package": "@scope/server", "installed_at": "2026-01-01T00:00:00Z"},
 "memory": {"spec": "y", "integrity": "sha512-CCCC", "version": "2.0.0", "package": "@scope/memory", "installed_at": "2026-01-01T00:00:00Z"}}}`)
	return ws, func(version, integrity string) {
		write(".pml/deps/everything/node_modules/.package-lock.json", fmt.Sprintf(`{"packages": {"node_modules/@scope/server": {"version": %q, "integrity": %q}}}`, version, integrity))
		// pml's own records, of the trees as they are now: the drift the
		// tests look at is of the version npm installed.
		if err := deps.NewStore(ws).Revouch(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// pml lock --check passes when what is installed is what .pml/deps.json
// records (a package not installed here counts as fine: its first use
// installs the recorded version), and exits 1 with one line per drift
// naming the server and what to run; --format json says the same.
func TestLockCheckFailsOnDrift(t *testing.T) {
	// Not in CI's mode: there pml lock --check also says that no
	// .pml.lock was compared, a line of its own.
	t.Setenv("CI", "")
	_, installed := lockWorkspace(t)
	installed("1.2.3", "sha512-AAAA")
	out, code, err := execRoot(t, "lock", "--check")
	if code != 0 || !strings.Contains(out, "none installed otherwise") {
		t.Fatalf("as recorded: exit %d (%v)\n%s", code, err, out)
	}
	out, code, _ = execRoot(t, "lock")
	if code != 0 || !strings.Contains(out, "everything  @scope/server  1.2.3") || !strings.Contains(out, "not_installed") {
		t.Errorf("pml lock: exit %d\n%s", code, out)
	}

	installed("1.3.0", "sha512-BBBB")
	out, code, err = execRoot(t, "lock", "--check")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || err == nil || len(lines) != 1 || !strings.HasPrefix(lines[0], "drift: everything: @scope/server is 1.3.0 (sha512-BBBB) in .pml/deps, but 1.2.3 (sha512-AAAA) is recorded") ||
		!strings.Contains(lines[0], "delete .pml/deps/everything and use the server again") {
		t.Fatalf("drift: exit %d (%v)\n%s", code, err, out)
	}
	// Without --check it lists, and exits 0.
	if out, code, _ := execRoot(t, "lock"); code != 0 || !strings.Contains(out, "drift") {
		t.Errorf("pml lock with drift: exit %d\n%s", code, out)
	}

	out, code, _ = execRoot(t, "lock", "--check", "--format", "json")
	var doc lockJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 1 || !doc.Check || doc.OK || len(doc.Entries) != 2 ||
		doc.Entries[0].Server != "everything" || doc.Entries[0].State != doctor.LockDrift || doc.Entries[0].InstalledVersion != "1.3.0" || doc.Entries[1].State != doctor.LockNotInstalled {
		t.Errorf("--format json: exit %d %v %+v\n%s", code, err, doc, out)
	}
}

// An unreadable record is exit 2, saying what to do.
func TestLockCheckUnreadableRecord(t *testing.T) {
	ws, _ := lockWorkspace(t)
	if err := os.WriteFile(filepath.Join(ws, ".pml", "deps.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, code, err := execRoot(t, "lock", "--check"); code != 2 || err == nil || !strings.Contains(err.Error(), "delete .pml/deps.json") {
		t.Errorf("exit %d: %v", code, err)
	}
}
