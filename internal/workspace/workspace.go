// Package workspace finds the directory pml works in: the one directory
// mounted into tool containers and the home of .pml.json and .pml/.
package workspace

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/pml-dev/pml/internal/termsafe"
)

// Markers are the files or directories that make a directory a project
// root, checked from the current directory upwards.
var Markers = []string{".git", "go.mod", "package.json", "deno.json", ".pml.json"}

// Result is a resolved workspace.
type Result struct {
	// Dir is absolute, cleaned, with symlinks resolved.
	Dir string
	// Source says how it was found: "PML_WORKSPACE", "marker <name>" or "cwd".
	Source string
	// Warning is set when pml fell back to the current directory.
	Warning string
}

// Resolve picks the workspace: $PML_WORKSPACE if set, else the nearest
// parent of cwd holding a marker, else cwd itself (with a warning).
func Resolve(env func(string) string, cwd string) (Result, error) {
	if v := env("PML_WORKSPACE"); v != "" {
		dir, err := clean(v)
		if err != nil {
			return Result{}, fmt.Errorf("PML_WORKSPACE=%q: %w", v, err)
		}
		// Even named on purpose: it would be mounted read-write into
		// every tool container.
		if why := Refused(dir, Home(env)); why != "" {
			return Result{}, fmt.Errorf("PML_WORKSPACE=%s cannot be the workspace: %s; set it to the project's directory", termsafe.Quote(v, 1024), why)
		}
		return Result{Dir: dir, Source: "PML_WORKSPACE"}, nil
	}
	start, err := clean(cwd)
	if err != nil {
		return Result{}, fmt.Errorf("current directory: %w", err)
	}
	for dir := start; ; dir = filepath.Dir(dir) {
		for _, m := range Markers {
			if _, err := os.Lstat(filepath.Join(dir, m)); err == nil {
				return Result{Dir: dir, Source: "marker " + m}, nil
			}
		}
		if dir == filepath.Dir(dir) {
			break
		}
	}
	return Result{
		Dir:     start,
		Source:  "cwd",
		Warning: fmt.Sprintf("no project root found above %s (looked for %v); using the current directory as the workspace. Set PML_WORKSPACE to choose one.", start, Markers),
	}, nil
}

func clean(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("cannot be used as a workspace: %w", err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is not a directory", real)
	}
	return real, nil
}
