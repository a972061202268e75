package audit

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readAll reads every entry of the log at path and the lines that are not.
func readAll(t *testing.T, path string) ([]Entry, []BadLine) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd := NewReader(f)
	var got []Entry
	for {
		e, err := rd.Next(Filter{})
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if n, ok := rd.Unterminated(); ok {
		t.Errorf("line %d has no newline", n)
	}
	return got, rd.Bad()
}

// A line cut short (a full disk, a crash) is terminated before the next
// entry, by this pml or by one that had the file open already: the next
// entry is whole, and the reader names the torn line by its number. Before,
// the entry was glued to the torn line and both were lost.
func TestAnEntryAfterATornLineStartsOnAFreshLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".pml", "audit.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	good := `{"time":"2026-01-02T03:04:05Z","tool":"shell:exec","decision":"allowed","duration_ms":1}` + "\n"
	torn := `{"time":"2026-01-02T03:05:05Z","tool":"shell:exec","deci`
	if err := os.WriteFile(path, []byte(good+torn), 0o600); err != nil {
		t.Fatal(err)
	}
	l := New(path)
	defer l.Close()
	if err := l.Record(Entry{Tool: "a:b", Decision: Allowed}); err != nil {
		t.Fatal(err)
	}
	// Another writer tears a line while this Log keeps the file open.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(torn); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := l.Record(Entry{Tool: "c:d", Decision: Denied}); err != nil {
		t.Fatal(err)
	}
	got, bad := readAll(t, path)
	var tools []string
	for _, e := range got {
		tools = append(tools, e.Tool+" "+e.Decision)
	}
	if strings.Join(tools, ",") != "shell:exec allowed,a:b allowed,c:d denied" {
		t.Errorf("entries: %v", tools)
	}
	if len(bad) != 2 || bad[0].Line != 2 || bad[1].Line != 4 || !strings.Contains(bad[0].Why, "cut short") {
		t.Errorf("bad lines: %+v, want lines 2 and 4, torn", bad)
	}
	// A log that ends well gets no empty line.
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), "\n\n") {
		t.Errorf("an empty line in the log:\n%s", data)
	}
}

// The reader numbers the lines that are not entries and tells a last line
// without its newline.
func TestTheReaderNumbersWhatIsNotAnEntry(t *testing.T) {
	log := "{\"decision\":\"allowed\",\"tool\":\"a\"}\n\nnot json\n{\"tool\":\"x\"}\n{\"decision\":\"denied\",\"tool\":\"b\"}\n{\"deci"
	rd := NewReader(strings.NewReader(log))
	var n int
	for {
		_, err := rd.Next(Filter{})
		if errors.Is(err, io.EOF) {
			break
		}
		n++
	}
	bad := rd.Bad()
	if n != 2 || len(bad) != 2 || bad[0].Line != 3 || bad[1].Line != 4 || !strings.Contains(bad[1].Why, "no decision") {
		t.Errorf("%d entries, bad %+v", n, bad)
	}
	if line, ok := rd.Unterminated(); !ok || line != 6 {
		t.Errorf("unterminated: %d %v, want line 6", line, ok)
	}
	if len(rd.Bad()) != 0 {
		t.Error("Bad returns each line once")
	}
}

// A log that is not a file pml can append to is refused before the call,
// with the path, the cause and the fix.
func TestReadyRefusesALogThatIsADirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".pml", "audit.jsonl")
	if err := os.MkdirAll(path, 0o700); err != nil {
		t.Fatal(err)
	}
	_, rerr := New(path).Ready()
	for name, err := range map[string]error{"Ready": rerr, "Probe": Probe(path)} {
		var we *WriteError
		if !errors.As(err, &we) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "directory") || !strings.Contains(err.Error(), "remove") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := New(path).Record(Entry{Tool: "a", Decision: Allowed}); err == nil {
		t.Error("Record into a directory succeeded")
	}
}
