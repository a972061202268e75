package toolbox

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/pathguard"
)

func callIn(t *testing.T, ws string, mounts []pathguard.Mount, tool string, args any) Response {
	t.Helper()
	raw, err := json.Marshal(args)
	must(t, err)
	return Execute(context.Background(), Request{Tool: tool, Args: raw, Workspace: ws, Mounts: mounts})
}

func TestTheAgentReadsTheExtraMountsAndWritesOnlyTheWritableOnes(t *testing.T) {
	ws := newWS(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	ro, rw := filepath.Join(root, "ro"), filepath.Join(root, "rw")
	must(t, os.MkdirAll(ro, 0o755))
	must(t, os.MkdirAll(rw, 0o755))
	must(t, os.WriteFile(filepath.Join(ro, "f.txt"), []byte("granted"), 0o644))
	mounts := []pathguard.Mount{{Path: ro, ReadOnly: true}, {Path: rw}}

	if got := ok(t, callIn(t, ws, mounts, "filesystem:read_file", map[string]any{"path": filepath.Join(ro, "f.txt")})); got != "granted" {
		t.Fatalf("read_file in a read-only mount: %q", got)
	}
	r := callIn(t, ws, mounts, "filesystem:write_file", map[string]any{"path": filepath.Join(ro, "new.txt"), "content": "x"})
	if !r.IsError || !strings.Contains(r.Text, "read-only mount "+ro) {
		t.Fatalf("write_file in a read-only mount: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(ro, "new.txt")); err == nil {
		t.Fatal("the file was written")
	}
	ok(t, callIn(t, ws, mounts, "filesystem:write_file", map[string]any{"path": filepath.Join(rw, "new.txt"), "content": "x"}))
	r = callIn(t, ws, nil, "filesystem:read_file", map[string]any{"path": filepath.Join(ro, "f.txt")})
	if !r.IsError || !strings.Contains(r.Text, "outside the workspace") {
		t.Fatalf("without the mount: %+v", r)
	}
}
