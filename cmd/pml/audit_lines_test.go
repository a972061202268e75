package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/audit"
)

// pml audit names each line that is not an entry by its number (a torn
// one above all) and shows the entries around it.
func TestPMLAuditNamesTheLinesThatAreNotEntries(t *testing.T) {
	ws := t.TempDir()
	path := filepath.Join(ws, ".pml", "audit.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	log := `{"time":"2026-01-02T03:04:05Z","tool":"a:one","decision":"allowed","duration_ms":1}
{"time":"2026-01-02T03:05:05Z","tool":"a:tw
{"time":"2026-01-02T03:06:05Z","tool":"a:three","decision":"denied","duration_ms":1}
{"time":"2026-01-02T03:07:05Z","tool":"a:fo`
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	if err := runAudit(context.Background(), ws, &out, &errOut, formatTable, audit.Filter{}, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "a:one") || !strings.Contains(out.String(), "a:three") {
		t.Errorf("the entries around the torn line:\n%s", out.String())
	}
	for _, want := range []string{"line 2 of " + path + ": not a JSON audit entry", "cut short", "line 4 of " + path + " has no end yet", "1 line(s) of " + path + " are not audit entries"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, errOut.String())
		}
	}
}
