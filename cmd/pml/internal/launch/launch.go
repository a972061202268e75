// Package launch is how a client's file starts pml: the path of the
// running pml, and whether a name on PATH is this pml. pml init writes
// client files with it; pml doctor checks them with it.
package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Executable is the absolute path of the running pml with symlinks
// resolved: .mcp.json must name a file that still works from any directory.
func Executable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("cannot find the pml executable: %w", err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return filepath.Abs(exe)
}

// Command is how a client file names pml: "pml" when the first pml
// on PATH is this one, so that the file holds no machine path and works
// for a teammate and from a copy of the project; else this pml's absolute
// path (onPath false: pml doctor and init's summary say so).
func Command(exe string, getenv func(string) string) (cmd string, onPath bool) {
	if p := FindOnPath("pml", getenv); p != "" && SameFile(p, exe) {
		return "pml", true
	}
	return exe, false
}

// FindOnPath is the first executable name in getenv("PATH"), as a shell
// would run it ("" when there is none). exec.LookPath reads the process's
// PATH only; init's getenv may be a test's.
func FindOnPath(name string, getenv func(string) string) string {
	if runtime.GOOS == "windows" && filepath.Ext(name) == "" {
		name += ".exe"
	}
	for _, dir := range filepath.SplitList(getenv("PATH")) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() || (runtime.GOOS != "windows" && st.Mode().Perm()&0o111 == 0) {
			continue
		}
		return p
	}
	return ""
}

// SameFile: a and b are one file (links resolved).
func SameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}
