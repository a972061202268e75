package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
