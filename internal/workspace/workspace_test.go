package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolve(t *testing.T) {
	root := t.TempDir()
	root, _ = filepath.EvalSymlinks(root)
	proj := filepath.Join(root, "proj")
	deep := filepath.Join(proj, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(root, "bare")
	if err := os.Mkdir(bare, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("PML_WORKSPACE wins over markers", func(t *testing.T) {
		r, err := Resolve(envOf(map[string]string{"PML_WORKSPACE": bare}), deep)
		if err != nil || r.Dir != bare || r.Source != "PML_WORKSPACE" || r.Warning != "" {
			t.Fatalf("got %+v, %v", r, err)
		}
	})
	t.Run("the nearest parent with a marker is the workspace", func(t *testing.T) {
		r, err := Resolve(envOf(nil), deep)
		if err != nil || r.Dir != proj || r.Source != "marker go.mod" {
			t.Fatalf("got %+v, %v", r, err)
		}
	})
	t.Run("no marker falls back to cwd with a warning", func(t *testing.T) {
		r, err := Resolve(envOf(nil), bare)
		if err != nil {
			t.Fatal(err)
		}
		// A marker may exist above the temp dir on some machines; then that wins.
		if r.Source == "cwd" && (r.Dir != bare || !strings.Contains(r.Warning, "PML_WORKSPACE")) {
			t.Fatalf("got %+v", r)
		}
	})
	t.Run("a PML_WORKSPACE that is a file is an error naming it", func(t *testing.T) {
		_, err := Resolve(envOf(map[string]string{"PML_WORKSPACE": file}), deep)
		if err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a PML_WORKSPACE that does not exist is an error", func(t *testing.T) {
		_, err := Resolve(envOf(map[string]string{"PML_WORKSPACE": filepath.Join(root, "nope")}), deep)
		if err == nil || !strings.Contains(err.Error(), "PML_WORKSPACE") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a workspace reached through a symlink resolves to the real path", func(t *testing.T) {
		link := filepath.Join(root, "link")
		if err := os.Symlink(proj, link); err != nil {
			t.Fatal(err)
		}
		r, err := Resolve(envOf(map[string]string{"PML_WORKSPACE": link}), deep)
		if err != nil || r.Dir != proj {
			t.Fatalf("got %+v, %v", r, err)
		}
	})
}
