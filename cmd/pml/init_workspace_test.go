package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

// pml init --workspace DIR (seed 001, option B): the project is made in
// DIR, not in the directory pml runs from nor in $PML_WORKSPACE, with the
// refusals of PML_WORKSPACE.
func TestInitWorkspaceFlagSetsUpThatDirectory(t *testing.T) {
	p := newProject(t) // PML_WORKSPACE is p.dir: the flag must win
	cwd, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	target, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	term := newFakeTerm(false, strings.NewReader(""), nil)
	o := initOptions{cloudURL: config.DefaultCloudURL, workspace: target}
	if err := runInit(context.Background(), o, term.terminal, p.env, cwd, testExe); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{".mcp.json", ".pml.json", ".gitignore"} {
		if _, err := os.Stat(filepath.Join(target, f)); err != nil {
			t.Errorf("%s not in the --workspace directory: %v", f, err)
		}
		for _, other := range []string{cwd, p.dir} {
			if _, err := os.Stat(filepath.Join(other, f)); err == nil {
				t.Errorf("%s written in %s too", f, other)
			}
		}
	}
	if !strings.Contains(term.out.String(), "workspace "+target+" (--workspace)") {
		t.Errorf("init does not say which workspace and why:\n%s", term.out)
	}

	for dir, want := range map[string]string{
		"/":                              "filesystem's root",
		p.home:                           "home directory",
		"/etc":                           "system directory",
		filepath.Join(target, "missing"): "no such directory",
	} {
		term := newFakeTerm(false, strings.NewReader(""), nil)
		o := initOptions{cloudURL: config.DefaultCloudURL, workspace: dir}
		err := runInit(context.Background(), o, term.terminal, p.env, cwd, testExe)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--workspace") {
			t.Errorf("--workspace %s: %v; want a refusal saying %q", dir, err, want)
		}
	}
}
