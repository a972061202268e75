package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// checkPath: the directory of this pml is on PATH, so that a shell and the
// clients pml init configures (they start `pml` by name) find it; when it
// is not, the fix is the line for the user's shell (install.sh prints the
// same advice, or writes it with --modify-path).
func checkPath(exe string, getenv func(string) string) Check {
	const name = "PATH"
	if exe == "" {
		return Check{}
	}
	dir := filepath.Dir(exe)
	bin := "pml"
	if runtime.GOOS == "windows" {
		bin = "pml.exe"
	}
	// The PATH given, in order, as a shell searches it.
	for _, d := range filepath.SplitList(getenv("PATH")) {
		if d == "" {
			continue
		}
		if samePath(d, dir) {
			return Check{"ok", name, dir + " (this pml's directory) is on PATH", ""}
		}
		if found := filepath.Join(d, bin); isExecutableFile(found) {
			// A link to this pml (as a package manager or a user makes) is
			// this pml.
			if samePath(found, exe) {
				return Check{"ok", name, "`pml` on PATH is this pml (" + found + ")", ""}
			}
			return Check{"warn", name, fmt.Sprintf("`pml` on PATH is %s, found before this pml (%s)", found, exe), "remove the other pml, or put " + dir + " before " + d + " on PATH"}
		}
	}
	rc, line := pathAdvice(runtime.GOOS, getenv("SHELL"), getenv("HOME"), getenv("ZDOTDIR"), dir)
	fix := "add " + dir + " to your user Path environment variable, then open a new terminal"
	if rc != "" {
		fix = fmt.Sprintf("echo '%s' >> %s, then open a new terminal", line, rc)
	}
	return Check{"warn", name, dir + " (this pml's directory) is not on PATH: your shell, and the clients `pml init` sets up to run `pml`, will not find this pml", fix}
}

// isExecutableFile: a regular file someone may run.
func isExecutableFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && (runtime.GOOS == "windows" || fi.Mode().Perm()&0o111 != 0)
}

// pathAdvice is the file of the user's shell (by $SHELL) that starts new
// terminals, and the line that puts dir on PATH there: "" on Windows.
// install.sh chooses the same way.
func pathAdvice(goos, shell, home, zdotdir, dir string) (rc, line string) {
	if goos == "windows" {
		return "", ""
	}
	line = `export PATH="` + dir + `:$PATH"`
	switch filepath.Base(shell) {
	case "zsh":
		if zdotdir == "" {
			zdotdir = home
		}
		return filepath.Join(zdotdir, ".zshrc"), line
	case "bash":
		// Terminals on macOS start login shells, which read .bash_profile.
		if goos == "darwin" {
			return filepath.Join(home, ".bash_profile"), line
		}
		return filepath.Join(home, ".bashrc"), line
	case "fish":
		return filepath.Join(home, ".config", "fish", "config.fish"), "fish_add_path " + dir
	}
	return filepath.Join(home, ".profile"), line
}

// samePath compares two paths after resolving links (as they are when a
// link cannot be resolved).
func samePath(a, b string) bool {
	if ra, err := filepath.EvalSymlinks(a); err == nil {
		a = ra
	}
	if rb, err := filepath.EvalSymlinks(b); err == nil {
		b = rb
	}
	if runtime.GOOS == "windows" {
		return strings.EqualFold(filepath.Clean(a), filepath.Clean(b))
	}
	return filepath.Clean(a) == filepath.Clean(b)
}
