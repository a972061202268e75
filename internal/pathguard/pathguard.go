// Package pathguard validates the path arguments of tool calls before any
// container starts: a path is made absolute (relative paths are taken from
// the workspace), cleaned, its symlinks resolved, and it must then lie
// inside the workspace. The container mount enforces the same boundary
// again; this check gives the user a clear error instead of a confusing
// "no such file" from inside the sandbox.
package pathguard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Error kinds, tested with errors.Is.
var (
	ErrEmpty   = errors.New("empty path")
	ErrOutside = errors.New("outside the workspace")
	ErrInvalid = errors.New("invalid path")
)

// MaxPath is the longest path accepted (Linux PATH_MAX).
const MaxPath = 4096

// maxLinks bounds symlink hops, like the kernel's limit of 40.
const maxLinks = 40

// Error says which path was refused and why.
type Error struct {
	Path   string
	Reason string
	Kind   error
}

func (e *Error) Error() string {
	return fmt.Sprintf("path %q: %s", e.Path, e.Reason)
}

// Unwrap returns the kind.
func (e *Error) Unwrap() error { return e.Kind }

// Resolve turns a tool's path argument into an absolute, cleaned path with
// every symlink resolved, and refuses anything that is not inside
// workspace. p may be absolute or relative to workspace; the target need
// not exist (a file about to be written): its longest existing prefix is
// resolved and the rest appended. Resolution stops at the first symlink
// that leads out of the workspace, so nothing outside it is ever looked
// at.
func Resolve(workspace, p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", &Error{Path: p, Reason: "no path given: pass a file path inside the workspace", Kind: ErrEmpty}
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", &Error{Path: p, Reason: "contains a NUL byte", Kind: ErrInvalid}
	}
	if len(p) > MaxPath {
		return "", &Error{Path: p[:64] + "…", Reason: fmt.Sprintf("is longer than %d bytes", MaxPath), Kind: ErrInvalid}
	}
	if !filepath.IsAbs(workspace) {
		return "", &Error{Path: p, Reason: fmt.Sprintf("the workspace %q is not absolute", workspace), Kind: ErrInvalid}
	}
	ws, err := filepath.EvalSymlinks(filepath.Clean(workspace))
	if err != nil {
		return "", &Error{Path: p, Reason: fmt.Sprintf("the workspace %s cannot be resolved: %v", workspace, err), Kind: ErrInvalid}
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(ws, abs)
	}
	abs = filepath.Clean(abs)
	// Judge the path as written first: "../x" is outside whatever the
	// filesystem says.
	raw := filepath.Clean(workspace)
	if !Within(ws, abs) {
		if !Within(raw, abs) {
			return "", outside(p, ws)
		}
		abs = filepath.Join(ws, rel(raw, abs))
	}
	real, err := walk(ws, raw, abs)
	if err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			pe.Path = p
			return "", pe
		}
		return "", &Error{Path: p, Reason: err.Error(), Kind: ErrInvalid}
	}
	if !Within(ws, real) {
		return "", outside(p, ws)
	}
	return real, nil
}

func outside(p, ws string) error {
	return &Error{Path: p, Reason: fmt.Sprintf("is outside the workspace %s: only files inside the workspace can be used", ws), Kind: ErrOutside}
}

// walk resolves the symlinks of abs (absolute, clean, inside the resolved
// workspace ws) one component at a time, as the kernel would, but never
// looks at anything outside ws: a link whose target leaves the workspace
// is refused without being followed. So the check itself touches no
// outside file (a link to /proc/1/cwd, to a hung network mount, to a
// FIFO) and its answer does not depend on what lies out there. raw is the
// workspace as given, before its own symlinks were resolved: link targets
// may name it. Components from the first one that cannot be looked up
// (missing: a file about to be written) are kept as written; they are
// plain names, inside ws.
func walk(ws, raw, abs string) (string, error) {
	cur, rest := ws, split(ws, abs)
	hops := 0
	for len(rest) > 0 {
		next := filepath.Join(cur, rest[0])
		fi, err := os.Lstat(next)
		if err != nil {
			return filepath.Join(append([]string{cur}, rest...)...), nil
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur, rest = next, rest[1:]
			continue
		}
		if hops++; hops > maxLinks {
			return "", &Error{Reason: "is a symlink loop", Kind: ErrInvalid}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		// A relative target is relative to the link's directory, which is
		// already resolved.
		if !filepath.IsAbs(target) {
			target = filepath.Join(cur, target)
		}
		target = filepath.Clean(target)
		if !Within(ws, target) {
			if !Within(raw, target) {
				return "", outside("", ws)
			}
			target = filepath.Join(ws, rel(raw, target))
		}
		// The target's own components may be links too: start over from
		// the workspace root with them.
		cur, rest = ws, append(split(ws, target), rest[1:]...)
	}
	return cur, nil
}

// split returns the components of p below dir (p is dir or inside it).
func split(dir, p string) []string {
	r := rel(dir, p)
	if r == "." {
		return nil
	}
	return strings.Split(r, string(filepath.Separator))
}

func rel(dir, p string) string {
	r, err := filepath.Rel(dir, p)
	if err != nil {
		return "."
	}
	return r
}

// Within reports whether the clean absolute path p is workspace or lies
// below it. It is a pure string check: "/ws2" is not within "/ws".
func Within(workspace, p string) bool {
	workspace = filepath.Clean(workspace)
	p = filepath.Clean(p)
	if p == workspace {
		return true
	}
	if workspace == "/" {
		return strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, workspace+string(filepath.Separator))
}
