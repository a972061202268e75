package audit

import (
	"path/filepath"
	"testing"
)

// What the audit log costs a call: the check before it (Ready: a lstat
// and a fallocate of the reserve) and the entry after (Record: a lstat, a
// look at the last byte, one write).
func BenchmarkReadyAndRecord(b *testing.B) {
	l := New(filepath.Join(b.TempDir(), ".pml", "audit.jsonl"))
	defer l.Close()
	e := Entry{Tool: "filesystem:read_file", Decision: Allowed, Pattern: "filesystem:*", ExitStatus: "ok", ArgKeys: []string{"path"}}
	for b.Loop() {
		tk, err := l.Ready()
		if err != nil {
			b.Fatal(err)
		}
		if err := tk.Record(e); err != nil {
			b.Fatal(err)
		}
	}
}

// Record alone, as before Ready existed, for comparison.
func BenchmarkRecord(b *testing.B) {
	l := New(filepath.Join(b.TempDir(), ".pml", "audit.jsonl"))
	defer l.Close()
	e := Entry{Tool: "filesystem:read_file", Decision: Allowed, Pattern: "filesystem:*", ExitStatus: "ok", ArgKeys: []string{"path"}}
	for b.Loop() {
		if err := l.Record(e); err != nil {
			b.Fatal(err)
		}
	}
}
