package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/deps"
)

// pml doctor's deps check is the lockfile check of what is installed: a
// package in .pml/deps at another version or integrity than
// .pml/deps.json records fails.
func TestDoctorDepsFailsOnDrift(t *testing.T) {
	ws := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if c := checkDeps(context.Background(), ws); c.status != "ok" {
		t.Fatalf("no deps: %+v", c)
	}
	write(".pml/deps.json", `{"servers": {"everything": {"spec": "x", "integrity": "sha512-AAAA", "version": "1.2.3", "package": "@scope/server", "installed_at": "2026-01-01T00:00:00Z"}}}`)
	installed := func(version, integrity string) {
		write(".pml/deps/everything/node_modules/.package-lock.json", fmt.Sprintf(`{"packages": {"node_modules/@scope/server": {"version": %q, "integrity": %q}}}`, version, integrity))
		// Vouched for as pml's own record of the tree as it is now: the
		// drift below is of the version npm installed.
		if err := deps.NewStore(ws).Revouch(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	installed("1.2.3", "sha512-AAAA")
	if c := checkDeps(context.Background(), ws); c.status != "ok" || !strings.Contains(c.detail, "@scope/server@1.2.3") {
		t.Fatalf("as recorded: %+v", c)
	}
	installed("1.3.0", "sha512-BBBB")
	if c := checkDeps(context.Background(), ws); c.status != "fail" || !strings.Contains(c.detail, "1.3.0") || !strings.Contains(c.detail, "1.2.3") {
		t.Fatalf("drift: %+v", c)
	}
}

// A record pml did not write here (a repository's, an older pml's) fails
// the check, naming what to run.
func TestDoctorDepsFailsOnAnUnvouchedRecord(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".pml", "deps", "everything"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".pml", "deps.json"), []byte(`{"servers": {"everything": {"spec": "x", "integrity": "sha512-AAAA", "installed_at": "2026-01-01T00:00:00Z"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c := checkDeps(context.Background(), ws)
	if c.status != "fail" || !strings.Contains(c.detail, "not honoured") || !strings.Contains(c.fix, "pml installs everything again") {
		t.Fatalf("unvouched: %+v", c)
	}
	if err := deps.NewStore(ws).Revouch(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := checkDeps(context.Background(), ws); c.status != "ok" {
		t.Fatalf("vouched: %+v", c)
	}
	if err := os.WriteFile(filepath.Join(ws, ".pml", "deps", "everything", "index.js"), []byte("evil()"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := checkDeps(context.Background(), ws); c.status != "fail" || !strings.Contains(c.detail, "changed since pml installed them") {
		t.Fatalf("a changed tree: %+v", c)
	}
}
