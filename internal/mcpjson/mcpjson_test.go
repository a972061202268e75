package mcpjson

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func pmlServer(key string) Server {
	s := Server{Type: "stdio", Command: "/opt/pml/bin/pml", Args: []string{"stdio"}, Env: map[string]string{"PML_WORKSPACE": "/ws"}}
	if key != "" {
		s.Env["PML_API_KEY"] = key
	}
	return s
}

func write(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(p, []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewFileHoldsJustThePMLServer(t *testing.T) {
	p := filepath.Join(t.TempDir(), FileName)
	f, err := Read(p)
	if err != nil || f.Exists {
		t.Fatalf("Read of a missing file: %+v, %v", f, err)
	}
	if err := f.SetServer("pml", pmlServer("")); err != nil {
		t.Fatal(err)
	}
	backedUp, err := f.Write(0o644)
	if err != nil || backedUp {
		t.Fatalf("Write: backup=%v err=%v", backedUp, err)
	}
	got, _ := os.ReadFile(p)
	want := `{
  "mcpServers": {
    "pml": {
      "type": "stdio",
      "command": "/opt/pml/bin/pml",
      "args": [
        "stdio"
      ],
      "env": {
        "PML_WORKSPACE": "/ws"
      }
    }
  }
}
`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := os.Stat(p + BackupSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a new file got a backup: %v", err)
	}
}

func TestMergeKeepsOtherServersUnknownKeysAndOrder(t *testing.T) {
	old := `{"zzz": {"keep": [1, 2.50, "x<y"]},
 "mcpServers": {
   "other": {"command": "npx", "args": ["-y", "thing"], "custom": true},
   "pml": {"command": "old", "timeout": 30, "env": {"TAVILY_API_KEY": "${TAVILY_API_KEY}", "PML_API_KEY": "old-key"}},
   "last": {"url": "http://127.0.0.1:1/mcp"}
 },
 "aaa": null}`
	p := write(t, old)
	f, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Servers(); !reflect.DeepEqual(got, []string{"other", "pml", "last"}) {
		t.Errorf("Servers() = %v", got)
	}
	s := pmlServer("")
	s.Unset = []string{"PML_API_KEY"}
	if err := f.SetServer("pml", s); err != nil {
		t.Fatal(err)
	}
	if !f.Changed() {
		t.Fatal("Changed() is false after an edit")
	}
	backedUp, err := f.Write(0o600)
	if err != nil || !backedUp {
		t.Fatalf("Write: backup=%v err=%v", backedUp, err)
	}
	backup, _ := os.ReadFile(p + BackupSuffix)
	if string(backup) != old {
		t.Errorf("backup differs from the old file:\n%s", backup)
	}
	if st, _ := os.Stat(p + BackupSuffix); st.Mode().Perm() != 0o640 {
		t.Errorf("backup mode %v, want the old file's 0640", st.Mode().Perm())
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	got, _ := os.ReadFile(p)
	text := string(got)
	// Numbers and escapes as written; top-level order kept.
	for _, want := range []string{`2.50`, `"x<y"`, `"aaa": null`, `"custom": true`, `"timeout": 30`, `"TAVILY_API_KEY": "${TAVILY_API_KEY}"`} {
		if !strings.Contains(text, want) {
			t.Errorf("%s lost %s:\n%s", p, want, text)
		}
	}
	if strings.Contains(text, "old-key") || strings.Contains(text, "PML_API_KEY") {
		t.Errorf("Unset did not remove PML_API_KEY:\n%s", text)
	}
	if i, j, k := strings.Index(text, `"zzz"`), strings.Index(text, `"mcpServers"`), strings.Index(text, `"aaa"`); !(i < j && j < k) {
		t.Errorf("top-level order changed:\n%s", text)
	}
	if i, j, k := strings.Index(text, `"other"`), strings.Index(text, `"pml"`), strings.Index(text, `"last"`); !(i < j && j < k) {
		t.Errorf("server order changed:\n%s", text)
	}
	var doc struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatal(err)
	}
	pml := doc.MCPServers["pml"]
	if pml["command"] != "/opt/pml/bin/pml" || pml["type"] != "stdio" || !reflect.DeepEqual(pml["args"], []any{"stdio"}) {
		t.Errorf("pml entry = %v", pml)
	}
	// The entry's own unknown key stays where it was: after command.
	if i, j := strings.Index(text, `"command": "/opt`), strings.Index(text, `"timeout"`); i > j {
		t.Errorf("entry key order changed:\n%s", text)
	}
}

func TestRewritingTheSameEntryChangesNothing(t *testing.T) {
	p := filepath.Join(t.TempDir(), FileName)
	f, _ := Read(p)
	_ = f.SetServer("pml", pmlServer("k"))
	if _, err := f.Write(0o600); err != nil {
		t.Fatal(err)
	}
	f2, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	_ = f2.SetServer("pml", pmlServer("k"))
	if f2.Changed() {
		t.Fatalf("the same entry again reports a change:\n%s\nvs\n%s", f2.Original(), f2.Bytes())
	}
	if backedUp, err := f2.Write(0o600); err != nil || backedUp {
		t.Fatalf("Write of an unchanged file: backup=%v err=%v", backedUp, err)
	}
	if _, err := os.Stat(p + BackupSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Error("an unchanged file was backed up")
	}
}

func TestBadFilesAreClearErrors(t *testing.T) {
	cases := []struct {
		name, content string
		line, col     int
		want          string
	}{
		{"syntax error names line and column", "{\n  \"mcpServers\": {\n    \"a\": {,}\n  }\n}\n", 3, 11, "invalid character ','"},
		{"truncated file", "{\"mcpServers\": {", 1, 16, "unexpected end of JSON input"},
		{"top level is a list", `[1, 2]`, 0, 0, "top level must be a JSON object"},
		{"mcpServers is a list", `{"mcpServers": []}`, 0, 0, `"mcpServers" must be an object`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := write(t, c.content)
			_, err := Read(p)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Read = %v, want *Error", err)
			}
			if e.Line != c.line || e.Column != c.col || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("error %q (line %d col %d), want %q at %d:%d naming the file", err, e.Line, e.Column, c.want, c.line, c.col)
			}
		})
	}
}

func TestServerReadsAnEntry(t *testing.T) {
	p := write(t, `{"mcpServers": {"pml": {"command": "/x/pml", "args": ["stdio"], "env": {"PML_WORKSPACE": "/w"}}, "bad": {"args": "no"}}}`)
	f, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	e, ok, err := f.Server("pml")
	if err != nil || !ok || e.Command != "/x/pml" || e.Env["PML_WORKSPACE"] != "/w" {
		t.Errorf("Server(pml) = %+v %v %v", e, ok, err)
	}
	if _, ok, err := f.Server("missing"); ok || err != nil {
		t.Errorf("Server(missing) = %v %v", ok, err)
	}
	if _, ok, err := f.Server("bad"); !ok || err == nil {
		t.Errorf("Server(bad) = %v %v, want an error", ok, err)
	}
}

func TestLinksAreNeitherReadNorWrittenThrough(t *testing.T) {
	ws := t.TempDir()
	outside := filepath.Join(t.TempDir(), "bashrc")
	if err := os.WriteFile(outside, []byte(`{"mcpServers": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// .mcp.json itself a link: refused, naming it.
	if err := os.Symlink(outside, Path(ws)); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(Path(ws)); err == nil || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), Path(ws)) {
		t.Errorf("a linked .mcp.json: %v", err)
	}
	// The backup a link: the write is refused before anything changes.
	if err := os.Remove(Path(ws)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(Path(ws), []byte(`{"mcpServers": {"a": {"command": "x"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Read(Path(ws))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, f.BackupPath()); err != nil {
		t.Fatal(err)
	}
	if err := f.SetServer("pml", pmlServer("")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(0o644); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("writing with a linked backup: %v", err)
	}
	if b, _ := os.ReadFile(outside); string(b) != `{"mcpServers": {}}` {
		t.Errorf("the link's target changed: %q", b)
	}
}
