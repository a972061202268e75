package audit

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestConcurrentRecordsAreWholeLinesInAPrivateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".pml", "audit.jsonl")
	l := New(path)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Record(Entry{Tool: "filesystem:read_file", Decision: Allowed, ArgKeys: Keys(map[string]any{"path": "secret"})}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", st.Mode().Perm())
	}
	f, _ := os.Open(path)
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %d is not JSON: %q", n, sc.Text())
		}
		if e.Time.IsZero() || e.ArgKeys[0] != "path" || strings.Contains(sc.Text(), "secret") {
			t.Errorf("line %q", sc.Text())
		}
		n++
	}
	if n != 50 {
		t.Errorf("%d lines, want 50", n)
	}
}

func TestANilLogDiscards(t *testing.T) {
	var l *Log
	if err := l.Record(Entry{}); err != nil {
		t.Error(err)
	}
}
