package pathguard

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ErrReadOnly marks a path a tool would change in a read-only mount.
var ErrReadOnly = errors.New("in a read-only mount")

// Mount is a directory beyond the workspace that a container sees (an
// extra mount, sandbox.mounts): paths in it are allowed too.
type Mount struct {
	// Path is where the container sees it (absolute, cleaned).
	Path string `json:"path"`
	// Host is the host directory or file it shows, with its links
	// resolved; "" means Path (inside the container, where the two are
	// one).
	Host string `json:"host,omitempty"`
	// ReadOnly: tools may read it, not change it.
	ReadOnly bool `json:"read_only,omitempty"`
}

func (m Mount) host() string {
	if m.Host == "" {
		return m.Path
	}
	return m.Host
}

// ResolveIn is Resolve for the workspace and the extra mounts: a path
// in the workspace resolves as Resolve does; an absolute path in a mount
// resolves within that mount, its links followed and kept inside it (a
// link in a granted directory to ~/.ssh is refused, not followed). It
// returns the path as the container sees it. write refuses a path in a
// read-only mount (ErrReadOnly).
func ResolveIn(workspace string, mounts []Mount, p string, write bool) (string, error) {
	real, err := Resolve(workspace, p)
	if err == nil || len(mounts) == 0 || !errors.Is(err, ErrOutside) || !filepath.IsAbs(p) {
		return real, err
	}
	abs := filepath.Clean(p)
	var m *Mount
	for i := range mounts {
		if Within(mounts[i].Path, abs) && (m == nil || len(mounts[i].Path) > len(m.Path)) {
			m = &mounts[i]
		}
	}
	if m == nil {
		return "", &Error{Path: p, Reason: fmt.Sprintf("is outside the workspace %s and the extra mounts (%s): only files inside them can be used", workspace, mountList(mounts)), Kind: ErrOutside}
	}
	real, err = resolveMount(*m, p, abs)
	if err != nil {
		return "", err
	}
	if write && m.ReadOnly {
		return "", &Error{Path: p, Reason: fmt.Sprintf(`is in the read-only mount %s: tools may read it, not change it (an entry of sandbox.mounts with "read_only": false makes it writable)`, m.Path), Kind: ErrReadOnly}
	}
	return real, nil
}

// resolveMount resolves abs (p cleaned), in m, on m's host side and
// returns it as the container sees it.
func resolveMount(m Mount, p, abs string) (string, error) {
	root := m.host()
	host := filepath.Join(root, rel(m.Path, abs))
	real, err := walk(root, root, host)
	if err == nil && !Within(root, real) {
		err = &Error{Kind: ErrOutside}
	}
	if err != nil {
		var pe *Error
		switch {
		case errors.Is(err, ErrOutside):
			return "", &Error{Path: p, Reason: fmt.Sprintf("leads outside the extra mount %s (through a link): only files inside it can be used", m.Path), Kind: ErrOutside}
		case errors.As(err, &pe):
			pe.Path = p
			return "", pe
		}
		return "", &Error{Path: p, Reason: err.Error(), Kind: ErrInvalid}
	}
	return filepath.Join(m.Path, rel(root, real)), nil
}

func mountList(ms []Mount) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Path
	}
	return strings.Join(out, ", ")
}
