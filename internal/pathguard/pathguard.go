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
// resolved and the rest appended.
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
	if !Within(ws, abs) && !Within(filepath.Clean(workspace), abs) {
		return "", outside(p, ws)
	}
	real, err := resolve(abs, 0)
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

// resolve resolves every symlink in the absolute, clean path abs; missing
// trailing components are kept as written. hops counts symlinks followed.
func resolve(abs string, hops int) (string, error) {
	// Find the longest existing prefix.
	existing, rest := abs, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		if strings.Contains(err.Error(), "too many links") {
			return "", &Error{Reason: "is a symlink loop", Kind: ErrInvalid}
		}
		// A dangling symlink is the last existing component: follow it by
		// hand so we know where a write would land.
		fi, lerr := os.Lstat(existing)
		if lerr != nil || fi.Mode()&os.ModeSymlink == 0 {
			return "", err
		}
		if hops >= maxLinks {
			return "", &Error{Reason: "is a symlink loop", Kind: ErrInvalid}
		}
		target, rerr := os.Readlink(existing)
		if rerr != nil {
			return "", rerr
		}
		// A relative target is relative to the link's (real) directory.
		if !filepath.IsAbs(target) {
			parentReal, perr := filepath.EvalSymlinks(filepath.Dir(existing))
			if perr != nil {
				return "", perr
			}
			target = filepath.Join(parentReal, target)
		}
		next, err := resolve(filepath.Clean(target), hops+1)
		if err != nil {
			return "", err
		}
		return filepath.Join(next, rest), nil
	}
	return filepath.Join(real, rest), nil
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
