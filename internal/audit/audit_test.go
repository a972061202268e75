package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
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

func TestEntriesAreCapped(t *testing.T) {
	dir := t.TempDir()
	l := New(filepath.Join(dir, ".pml", "audit.jsonl"))
	args := map[string]any{}
	for i := 0; i < 1000; i++ {
		args[fmt.Sprintf("k%04d-%s", i, strings.Repeat("é", 100))] = i
	}
	if err := l.Record(Entry{Tool: strings.Repeat("t", 10000), Decision: Allowed, ArgKeys: Keys(args)}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	var e Entry
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	if len(e.Tool) > MaxToolBytes || !strings.Contains(e.Tool, "[10000 bytes]") {
		t.Errorf("tool name: %d bytes, %q", len(e.Tool), e.Tool)
	}
	if len(e.ArgKeys) != MaxArgKeys+1 || e.ArgKeys[MaxArgKeys] != "…[968 more]" {
		t.Errorf("%d names recorded, last %q", len(e.ArgKeys), e.ArgKeys[len(e.ArgKeys)-1])
	}
	for _, k := range e.ArgKeys {
		if len(k) > MaxKeyBytes || !utf8.ValidString(k) {
			t.Errorf("name %q: %d bytes", k, len(k))
		}
	}
	if len(raw) > 4096 {
		t.Errorf("one entry took %d bytes", len(raw))
	}
}

func TestTheLogIsNeverWrittenThroughALink(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	victim := filepath.Join(base, "bashrc")
	if err := os.MkdirAll(filepath.Join(ws, ".pml"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, []byte("orig\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(ws, ".pml", "audit.jsonl")); err != nil {
		t.Fatal(err)
	}
	l := New(filepath.Join(ws, ".pml", "audit.jsonl"))
	err := l.Record(Entry{Tool: "a:b", Decision: Allowed, ArgKeys: []string{"$(touch /tmp/x)"}})
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("want a refusal naming the link, got %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "orig\n" {
		t.Errorf("the link's target was written: %q", b)
	}
}
