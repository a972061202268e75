package extramount

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pml-dev/pml/internal/config"
)

// maxLinks bounds the links followed resolving one source (as the
// kernel's 40).
const maxLinks = 40

// errLinkInPath: a path that should have no link has one now.
var errLinkInPath = errors.New("a link is in its path")

// trace resolves p (absolute, cleaned) one component at a time, as the
// kernel would, and returns the path it leads to (no link in it) and
// where each link it followed lies: a link inside the workspace or a
// writable mount is a place a container could re-point, even when p and
// what it leads to are outside both.
func trace(p string) (real string, links []string, err error) {
	if !filepath.IsAbs(p) {
		return "", nil, fmt.Errorf("%q is not an absolute path", p)
	}
	cur := filepath.VolumeName(p) + string(filepath.Separator)
	rest := parts(p[len(filepath.VolumeName(p)):])
	hops := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		if name == ".." {
			// cur has no link in it: its parent is lexical.
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if err != nil {
			return "", links, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > maxLinks {
			return "", links, fmt.Errorf("%s: too many links (a loop?)", p)
		}
		links = append(links, next)
		target, err := os.Readlink(next)
		if err != nil {
			return "", links, err
		}
		if filepath.IsAbs(target) {
			cur = filepath.VolumeName(target) + string(filepath.Separator)
			target = target[len(filepath.VolumeName(target)):]
		}
		rest = append(parts(target), rest...)
	}
	return cur, links, nil
}

// parts splits a path into its names, dropping empty ones and ".".
func parts(p string) []string {
	var out []string
	for _, n := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == filepath.Separator }) {
		if n != "." {
			out = append(out, n)
		}
	}
	return out
}

// Measure is what trust records of a mount source when a person trusts
// it: where it leads now, and what is there.
func Measure(source string) (config.MountPin, error) {
	real, _, err := trace(filepath.Clean(source))
	if err != nil {
		return config.MountPin{}, err
	}
	fi, err := statNoLinks(real)
	if err != nil {
		return config.MountPin{}, err
	}
	dev, ino := identity(fi)
	return config.MountPin{Path: real, Dev: dev, Ino: ino}, nil
}

// statNoLinks opens p refusing any link on its way (on Linux with
// openat2 and RESOLVE_NO_SYMLINKS: the kernel checks each component) and
// describes what it opened.
func statNoLinks(p string) (fs.FileInfo, error) {
	f, err := openNoLinks(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// openWalk is openNoLinks where the kernel cannot do it: each component
// is looked at first (a race a host process could win, never a
// container: callers have refused paths a container can write).
func openWalk(p string) (*os.File, error) {
	cur := filepath.VolumeName(p) + string(filepath.Separator)
	for _, n := range parts(p[len(filepath.VolumeName(p)):]) {
		cur = filepath.Join(cur, n)
		fi, err := os.Lstat(cur)
		if err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s: %w", cur, errLinkInPath)
		}
	}
	return os.Open(p)
}
