//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pml init --workspace DIR (seed 001, option B), run from another
// directory: the project files land in DIR; $HOME is refused.
func TestInitWorkspaceFlag(t *testing.T) {
	target, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	r := runCLI(t, elsewhere, nil, "", "init", "--workspace", target, "--yes", "--local")
	if r.code != 0 || !strings.Contains(logText(r.stderr), "workspace "+target+" (--workspace)") {
		t.Fatalf("pml init --workspace: exit %d\n%s", r.code, r.stderr)
	}
	for _, f := range []string{".mcp.json", ".pml.json", ".gitignore"} {
		if _, err := os.Stat(filepath.Join(target, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		if _, err := os.Stat(filepath.Join(elsewhere, f)); err == nil {
			t.Errorf("%s written in the current directory too", f)
		}
	}
	home := t.TempDir()
	r = runCLI(t, elsewhere, []string{"HOME=" + home}, "", "init", "--workspace", home, "--yes", "--local")
	if r.code != 2 || !strings.Contains(logText(r.stderr), "home directory") {
		t.Errorf("pml init --workspace $HOME: exit %d\n%s", r.code, r.stderr)
	}
}
