package toolbox

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newWS(t *testing.T) string {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.MkdirAll(filepath.Join(ws, "src", "pkg"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\ntwo\nthree\nfour\n"), 0o640))
	must(t, os.WriteFile(filepath.Join(ws, "src", "main.go"), []byte("package main\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "src", "pkg", "util.go"), []byte("package pkg\n"), 0o644))
	return ws
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func call(t *testing.T, ws, tool string, args any) Response {
	t.Helper()
	raw, err := json.Marshal(args)
	must(t, err)
	return Execute(context.Background(), Request{Tool: tool, Args: raw, Workspace: ws})
}

func ok(t *testing.T, r Response) string {
	t.Helper()
	if r.IsError {
		t.Fatalf("unexpected tool error: %s", r.Text)
	}
	return r.Text
}

func failed(t *testing.T, r Response, want string) {
	t.Helper()
	if !r.IsError {
		t.Fatalf("expected an error containing %q, got success: %s", want, r.Text)
	}
	if !strings.Contains(r.Text, want) {
		t.Fatalf("error %q does not contain %q", r.Text, want)
	}
}

func TestReadFile(t *testing.T) {
	ws := newWS(t)
	if got := ok(t, call(t, ws, "filesystem:read_file", map[string]any{"path": "notes.txt"})); got != "one\ntwo\nthree\nfour\n" {
		t.Fatalf("read: %q", got)
	}
	if got := ok(t, call(t, ws, "filesystem:read_file", map[string]any{"path": filepath.Join(ws, "notes.txt"), "head": 2})); got != "one\ntwo\n" {
		t.Fatalf("head: %q", got)
	}
	if got := ok(t, call(t, ws, "filesystem:read_file", map[string]any{"path": "notes.txt", "tail": 1})); got != "four\n" {
		t.Fatalf("tail: %q", got)
	}
	failed(t, call(t, ws, "filesystem:read_file", map[string]any{"path": "notes.txt", "head": 1, "tail": 1}), "not both")
	failed(t, call(t, ws, "filesystem:read_file", map[string]any{"path": "notes.txt", "head": -1}), `"head" must be a whole number`)
	failed(t, call(t, ws, "filesystem:read_file", map[string]any{"path": "missing.txt"}), "no such file or directory")
	failed(t, call(t, ws, "filesystem:read_file", map[string]any{"path": "src"}), "is a directory")
	failed(t, call(t, ws, "filesystem:read_file", map[string]any{}), `argument "path" is required`)
	failed(t, call(t, ws, "filesystem:read_file", map[string]any{"path": 7}), `"path" must be a string`)
}

func TestReadFileTruncates(t *testing.T) {
	ws := newWS(t)
	must(t, os.WriteFile(filepath.Join(ws, "big"), bytes.Repeat([]byte("x"), MaxRead+10), 0o644))
	got := ok(t, call(t, ws, "filesystem:read_file", map[string]any{"path": "big"}))
	if !strings.HasSuffix(got, "use head or tail]") || len(got) < MaxRead {
		t.Fatalf("no truncation note (len %d): %q", len(got), got[len(got)-80:])
	}
}

func TestAgentRechecksPaths(t *testing.T) {
	ws := newWS(t)
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644))
	must(t, os.Symlink(outside, filepath.Join(ws, "escape")))
	for _, tool := range []string{"filesystem:read_file", "filesystem:write_file", "filesystem:get_file_info"} {
		failed(t, call(t, ws, tool, map[string]any{"path": "../x", "content": "x"}), "outside the workspace")
		failed(t, call(t, ws, tool, map[string]any{"path": "/etc/passwd", "content": "x"}), "outside the workspace")
		failed(t, call(t, ws, tool, map[string]any{"path": "escape/secret", "content": "x"}), "outside the workspace")
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s" {
		t.Fatalf("the outside file changed: %q", b)
	}
	got := ok(t, call(t, ws, "filesystem:read_multiple_files", map[string]any{"paths": []string{"notes.txt", "/etc/passwd"}}))
	if !strings.Contains(got, "one\ntwo") || !strings.Contains(got, "/etc/passwd: Error - ") {
		t.Fatalf("read_multiple_files: %q", got)
	}
}

func TestWriteAndEdit(t *testing.T) {
	ws := newWS(t)
	ok(t, call(t, ws, "filesystem:write_file", map[string]any{"path": "new.txt", "content": "alpha\nbeta\n"}))
	failed(t, call(t, ws, "filesystem:write_file", map[string]any{"path": "nodir/new.txt", "content": "x"}), "create it first")

	diff := ok(t, call(t, ws, "filesystem:edit_file", map[string]any{"path": "new.txt", "dryRun": true,
		"edits": []map[string]string{{"oldText": "beta", "newText": "gamma"}}}))
	if !strings.Contains(diff, "-beta") || !strings.Contains(diff, "+gamma") {
		t.Fatalf("diff: %q", diff)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "new.txt")); string(b) != "alpha\nbeta\n" {
		t.Fatalf("dryRun wrote: %q", b)
	}
	ok(t, call(t, ws, "filesystem:edit_file", map[string]any{"path": "new.txt",
		"edits": []map[string]string{{"oldText": "beta", "newText": "gamma"}}}))
	if b, _ := os.ReadFile(filepath.Join(ws, "new.txt")); string(b) != "alpha\ngamma\n" {
		t.Fatalf("edit: %q", b)
	}
	// An edit that fails leaves the file untouched, even when an earlier
	// edit of the same call matched.
	failed(t, call(t, ws, "filesystem:edit_file", map[string]any{"path": "new.txt",
		"edits": []map[string]string{{"oldText": "alpha", "newText": "A"}, {"oldText": "zeta", "newText": "Z"}}}), "not found")
	must(t, os.WriteFile(filepath.Join(ws, "dup.txt"), []byte("x x"), 0o600))
	failed(t, call(t, ws, "filesystem:edit_file", map[string]any{"path": "dup.txt",
		"edits": []map[string]string{{"oldText": "x", "newText": "y"}}}), "occurs 2 times")
	if b, _ := os.ReadFile(filepath.Join(ws, "new.txt")); string(b) != "alpha\ngamma\n" {
		t.Fatalf("failed edit changed the file: %q", b)
	}
	failed(t, call(t, ws, "filesystem:edit_file", map[string]any{"path": "new.txt", "edits": "nope"}), "non-empty array")
	// The mode of an edited file is kept.
	ok(t, call(t, ws, "filesystem:edit_file", map[string]any{"path": "dup.txt",
		"edits": []map[string]string{{"oldText": "x x", "newText": "y"}}}))
	if st, _ := os.Stat(filepath.Join(ws, "dup.txt")); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode changed to %v", st.Mode().Perm())
	}
}

func TestDirectoriesAndMoves(t *testing.T) {
	ws := newWS(t)
	list := ok(t, call(t, ws, "filesystem:list_directory", map[string]any{"path": "."}))
	if !strings.Contains(list, "[DIR] src") || !strings.Contains(list, "[FILE] notes.txt") {
		t.Fatalf("list: %q", list)
	}
	ok(t, call(t, ws, "filesystem:create_directory", map[string]any{"path": "a/b/c"}))
	ok(t, call(t, ws, "filesystem:create_directory", map[string]any{"path": "a/b/c"}))
	if got := ok(t, call(t, ws, "filesystem:list_directory", map[string]any{"path": "a/b/c"})); got != "(empty directory)" {
		t.Fatalf("empty dir: %q", got)
	}

	treeText := ok(t, call(t, ws, "filesystem:directory_tree", map[string]any{"path": "src"}))
	var tree []treeEntry
	must(t, json.Unmarshal([]byte(treeText), &tree))
	if len(tree) != 2 || tree[1].Name != "pkg" || tree[1].Type != "directory" || tree[1].Children[0].Name != "util.go" {
		t.Fatalf("tree: %s", treeText)
	}
	failed(t, call(t, ws, "filesystem:directory_tree", map[string]any{"path": "notes.txt"}), "not a directory")

	ok(t, call(t, ws, "filesystem:move_file", map[string]any{"source": "notes.txt", "destination": "a/notes.txt"}))
	if _, err := os.Stat(filepath.Join(ws, "a", "notes.txt")); err != nil {
		t.Fatal(err)
	}
	failed(t, call(t, ws, "filesystem:move_file", map[string]any{"source": "src/main.go", "destination": "a/notes.txt"}), "already exists")
	failed(t, call(t, ws, "filesystem:move_file", map[string]any{"source": "gone", "destination": "b"}), "no such file")
	failed(t, call(t, ws, "filesystem:move_file", map[string]any{"source": "src/main.go", "destination": "../main.go"}), "outside the workspace")
}

func TestSearchAndInfo(t *testing.T) {
	ws := newWS(t)
	got := ok(t, call(t, ws, "filesystem:search_files", map[string]any{"path": ".", "pattern": "*.go"}))
	if got != filepath.Join(ws, "src", "main.go")+"\n"+filepath.Join(ws, "src", "pkg", "util.go") {
		t.Fatalf("glob search: %q", got)
	}
	got = ok(t, call(t, ws, "filesystem:search_files", map[string]any{"path": ".", "pattern": "UTIL", "excludePatterns": []string{}}))
	if got != filepath.Join(ws, "src", "pkg", "util.go") {
		t.Fatalf("substring search: %q", got)
	}
	got = ok(t, call(t, ws, "filesystem:search_files", map[string]any{"path": ".", "pattern": "*.go", "excludePatterns": []string{"pkg"}}))
	if strings.Contains(got, "util.go") {
		t.Fatalf("exclude ignored: %q", got)
	}
	if got := ok(t, call(t, ws, "filesystem:search_files", map[string]any{"path": ".", "pattern": "zzz"})); got != "No matches found" {
		t.Fatalf("no match: %q", got)
	}
	failed(t, call(t, ws, "filesystem:search_files", map[string]any{"path": ".", "pattern": "[x"}), "not a valid glob")

	r := call(t, ws, "filesystem:get_file_info", map[string]any{"path": "notes.txt"})
	ok(t, r)
	var fi FileInfo
	must(t, json.Unmarshal(r.Structured, &fi))
	if fi.Size != 19 || !fi.IsFile || fi.IsDirectory || fi.Permissions != "640" {
		t.Fatalf("info: %+v", fi)
	}
}

func TestBadRequests(t *testing.T) {
	ws := newWS(t)
	failed(t, call(t, ws, "filesystem:nope", map[string]any{}), "unknown tool")
	r := Execute(context.Background(), Request{Tool: "filesystem:read_file", Args: json.RawMessage(`[1]`), Workspace: ws})
	failed(t, r, "must be a JSON object")

	var out bytes.Buffer
	must(t, Serve(context.Background(), strings.NewReader("not json"), &out))
	var resp Response
	must(t, json.Unmarshal(out.Bytes(), &resp))
	if !resp.IsError || !strings.Contains(resp.Text, "no valid request") {
		t.Fatalf("Serve of garbage: %+v", resp)
	}
	out.Reset()
	req, _ := json.Marshal(Request{Tool: "filesystem:read_file", Args: json.RawMessage(`{"path":"notes.txt"}`), Workspace: ws})
	must(t, Serve(context.Background(), bytes.NewReader(req), &out))
	resp = Response{}
	must(t, json.Unmarshal(out.Bytes(), &resp))
	if resp.IsError || resp.Text != "one\ntwo\nthree\nfour\n" {
		t.Fatalf("Serve: %+v", resp)
	}
}

func TestToolDefinitions(t *testing.T) {
	seen := map[string]bool{}
	for _, tool := range Filesystem {
		if seen[tool.Name] {
			t.Fatalf("duplicate %s", tool.Name)
		}
		seen[tool.Name] = true
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || schema.Type != "object" {
			t.Fatalf("%s: bad schema: %v", tool.Name, err)
		}
		for _, p := range append(tool.PathArgs, schema.Required...) {
			if _, ok := schema.Properties[p]; !ok {
				t.Fatalf("%s: %q is not in the schema", tool.Name, p)
			}
		}
		if tool.Description == "" {
			t.Fatalf("%s: no description", tool.Name)
		}
	}
	if len(seen) != 10 {
		t.Fatalf("%d filesystem tools, want 10", len(seen))
	}
}

// TestWritesDoNotFollowHardLinks: a hard link inside the workspace may
// name a file outside it (same inode). Writing in place would change that
// outside file; the agent replaces the name instead, so only the
// workspace's entry gets the new content and the mode is kept.
func TestWritesDoNotFollowHardLinks(t *testing.T) {
	ws := newWS(t)
	outside := filepath.Join(t.TempDir(), "outside.txt")
	must(t, os.WriteFile(outside, []byte("outside secret"), 0o640))
	must(t, os.Link(outside, filepath.Join(ws, "w.txt")))
	must(t, os.Link(outside, filepath.Join(ws, "e.txt")))

	ok(t, call(t, ws, "filesystem:write_file", map[string]any{"path": "w.txt", "content": "new"}))
	ok(t, call(t, ws, "filesystem:edit_file", map[string]any{"path": "e.txt", "edits": []any{map[string]any{"oldText": "secret", "newText": "edited"}}}))

	if b, _ := os.ReadFile(outside); string(b) != "outside secret" {
		t.Fatalf("a write through a hard link changed the outside file: %q", b)
	}
	for name, want := range map[string]string{"w.txt": "new", "e.txt": "outside edited"} {
		p := filepath.Join(ws, name)
		if b, _ := os.ReadFile(p); string(b) != want {
			t.Errorf("%s = %q, want %q", name, b, want)
		}
		st, err := os.Stat(p)
		must(t, err)
		if st.Mode().Perm() != 0o640 {
			t.Errorf("%s mode %v, want the original 0640", name, st.Mode().Perm())
		}
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(ws)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".pml-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestPMLsOwnFilesAreNotWritable: the filesystem tools cannot change
// pml's configuration and state, directly or through a link, so a tool
// allowed to write files cannot grant itself more for later calls.
// Reading them stays possible.
func TestPMLsOwnFilesAreNotWritable(t *testing.T) {
	ws := newWS(t)
	must(t, os.WriteFile(filepath.Join(ws, ".pml.json"), []byte(`{"permissions": {"allow": ["filesystem:*"]}}`), 0o644))
	must(t, os.MkdirAll(filepath.Join(ws, ".pml"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, ".pml", "mcp.lock"), []byte("{}"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, ".mcp.json"), []byte("{}"), 0o644))
	must(t, os.Symlink(".pml.json", filepath.Join(ws, "cfg-link")))
	must(t, os.Symlink(".pml", filepath.Join(ws, "state-link")))
	edit := []any{map[string]any{"oldText": "filesystem:*", "newText": "*"}}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"filesystem:write_file", map[string]any{"path": ".pml.json", "content": `{"permissions": {"allow": ["*"]}}`}},
		{"filesystem:write_file", map[string]any{"path": "cfg-link", "content": "x"}},
		{"filesystem:write_file", map[string]any{"path": ".pml/mcp.lock", "content": "x"}},
		{"filesystem:write_file", map[string]any{"path": "state-link/routing-cache.json", "content": "x"}},
		{"filesystem:write_file", map[string]any{"path": ".mcp.json", "content": "x"}},
		{"filesystem:edit_file", map[string]any{"path": ".pml.json", "edits": edit}},
		{"filesystem:edit_file", map[string]any{"path": "./src/../.pml.json", "edits": edit}},
		{"filesystem:create_directory", map[string]any{"path": ".pml/new"}},
		{"filesystem:move_file", map[string]any{"source": ".pml.json", "destination": "old.json"}},
		{"filesystem:move_file", map[string]any{"source": "notes.txt", "destination": ".pml.json.new/../.pml.json"}},
		{"filesystem:move_file", map[string]any{"source": ".pml", "destination": "state"}},
		// Any spelling: on a case-insensitive filesystem (macOS, Windows
		// hosts) these are the same files.
		{"filesystem:write_file", map[string]any{"path": ".PML.JSON", "content": `{"permissions": {"allow": ["*"]}}`}},
		{"filesystem:write_file", map[string]any{"path": ".Mcp.Json", "content": "x"}},
		{"filesystem:write_file", map[string]any{"path": ".ENV", "content": "X=1"}},
		{"filesystem:write_file", map[string]any{"path": ".env", "content": "X=1"}},
		{"filesystem:create_directory", map[string]any{"path": ".PML/new"}},
		{"filesystem:move_file", map[string]any{"source": "notes.txt", "destination": ".Pml.Json"}},
	} {
		failed(t, call(t, ws, c.tool, c.args), "pml's own configuration or state")
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".pml.json")); string(b) != `{"permissions": {"allow": ["filesystem:*"]}}` {
		t.Errorf(".pml.json changed: %s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".pml", "mcp.lock")); string(b) != "{}" {
		t.Errorf(".pml/mcp.lock changed: %s", b)
	}
	// Names that only start like them are ordinary files.
	ok(t, call(t, ws, "filesystem:write_file", map[string]any{"path": ".pml.json.bak", "content": "x"}))
	ok(t, call(t, ws, "filesystem:write_file", map[string]any{"path": "src/.pml.json", "content": "x"}))
	ok(t, call(t, ws, "filesystem:read_file", map[string]any{"path": ".pml.json"}))
}
