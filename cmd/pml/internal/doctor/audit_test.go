package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pml doctor says whether the audit log can take entries, and the fix
// when it cannot; it creates nothing.
func TestDoctorChecksTheAuditLog(t *testing.T) {
	ws := t.TempDir()
	if c := checkAuditLog(ws); c.status != "ok" {
		t.Errorf("a workspace without .pml/: %+v", c)
	}
	if _, err := os.Stat(filepath.Join(ws, ".pml")); !os.IsNotExist(err) {
		t.Errorf("doctor created .pml/: %v", err)
	}
	path := filepath.Join(ws, ".pml", "audit.jsonl")
	if err := os.MkdirAll(path, 0o700); err != nil {
		t.Fatal(err)
	}
	c := checkAuditLog(ws)
	if c.status != "fail" || !strings.Contains(c.detail, path) || !strings.Contains(c.detail, "refuses every tool call") || !strings.Contains(c.fix, "remove or rename") {
		t.Errorf("a log that is a directory: %+v", c)
	}
}
