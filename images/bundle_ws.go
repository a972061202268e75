package images

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/pml-dev/pml/internal/safefs"
)

// The project files a bundle carries, as paths under the workspace's .pml
// directory. Each is what pml reads there to run offline:
//
//	deps/<server>       a server's installed dependencies (one per server)
//	deps.json           what was installed, with which integrity
//	mcp.lock            the integrity of every registry entry fetched
//	tools-cache.json    the servers' tool lists, so tools are listed
//	                    without starting every server
//	routing-cache.json  the cloud's routing, for an offline start
//	registry-cache      the registry's code and metadata, for an offline start
var workspaceFiles = []string{"deps.json", "mcp.lock", "tools-cache.json", "routing-cache.json"}

const workspaceRegistryCache = "registry-cache"

// WorkspacePart reports whether p is a part of .pml a bundle may carry.
func WorkspacePart(p string) bool {
	if p == workspaceRegistryCache {
		return true
	}
	for _, f := range workspaceFiles {
		if p == f {
			return true
		}
	}
	srv, ok := strings.CutPrefix(p, "deps/")
	return ok && bundleNameRE.MatchString(srv)
}

// WorkspaceParts lists the parts of ws/.pml to carry: the dependencies of
// servers (those installed), then every file of workspaceFiles and the
// registry cache that exists.
func WorkspaceParts(ws string, servers []string) ([]string, error) {
	if err := safefs.CheckStateDir(ws); err != nil {
		return nil, err
	}
	var parts []string
	for _, s := range servers {
		p := "deps/" + s
		if !WorkspacePart(p) {
			return nil, fmt.Errorf("server name %q cannot be carried in a bundle", s)
		}
		parts = append(parts, p)
	}
	for _, f := range append(append([]string{}, workspaceFiles...), workspaceRegistryCache) {
		fi, err := os.Lstat(filepath.Join(ws, safefs.StateDir, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s is a symbolic link; pml does not follow links for its own files: replace it with the file", filepath.Join(ws, safefs.StateDir, f))
		}
		parts = append(parts, f)
	}
	return parts, nil
}

// WriteWorkspaceTar writes the parts of ws/.pml as a tar, names relative
// to .pml. Links are kept as links (npm's node_modules/.bin), never
// followed; each entry passes the checks load applies, so a tree load
// would refuse is refused here, before anything is written.
func WriteWorkspaceTar(ctx context.Context, w io.Writer, ws string, parts []string) error {
	base := filepath.Join(ws, safefs.StateDir)
	tw := tar.NewWriter(w)
	chk := newEntryCheck(parts)
	for _, part := range parts {
		root := filepath.Join(base, filepath.FromSlash(part))
		if fi, err := os.Lstat(root); err != nil {
			return err
		} else if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link; pml does not follow links for its own files", root)
		}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(base, p)
			link := ""
			if fi.Mode()&fs.ModeSymlink != 0 {
				if link, err = os.Readlink(p); err != nil {
					return err
				}
			}
			h, err := tar.FileInfoHeader(fi, link)
			if err != nil {
				return err
			}
			h.Name = filepath.ToSlash(rel)
			if fi.IsDir() {
				h.Name += "/"
			}
			h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
			h.Format = tar.FormatPAX
			h.Mode &= 0o777
			if err := chk.check(h); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if !fi.Mode().IsRegular() {
				return nil
			}
			f, err := safefs.Open(ws, p)
			if err != nil {
				return err
			}
			defer f.Close()
			n, err := io.Copy(tw, f)
			if err == nil && n != h.Size {
				err = fmt.Errorf("%s changed while it was being saved", p)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	if err := chk.complete(); err != nil {
		return err
	}
	return tw.Close()
}

// entryCheck refuses a workspace tar entry that load could write anywhere
// but inside its part: a name outside the parts, an absolute or ".." name,
// a link pointing out of its part (or anywhere, outside deps), an entry
// beneath a link, a type other than file, directory or link, or an entry
// seen twice.
type entryCheck struct {
	parts []string
	links map[string]bool
	seen  map[string]bool
}

func newEntryCheck(parts []string) *entryCheck {
	return &entryCheck{parts: parts, links: map[string]bool{}, seen: map[string]bool{}}
}

func (c *entryCheck) check(h *tar.Header) error {
	name := strings.TrimSuffix(h.Name, "/")
	if name == "" || path.IsAbs(name) || path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") {
		return fmt.Errorf("entry %q is not a clean relative path", h.Name)
	}
	part := ""
	for _, p := range c.parts {
		if name == p || strings.HasPrefix(name, p+"/") {
			part = p
			break
		}
	}
	if part == "" {
		return fmt.Errorf("entry %q is outside the parts the bundle lists (%s)", name, strings.Join(c.parts, ", "))
	}
	if c.seen[name] {
		return fmt.Errorf("entry %q appears twice", name)
	}
	for a := path.Dir(name); a != "." && a != "/"; a = path.Dir(a) {
		if c.links[a] {
			return fmt.Errorf("entry %q lies beneath the link %q", name, a)
		}
	}
	isDeps := strings.HasPrefix(part, "deps/")
	switch h.Typeflag {
	case tar.TypeReg:
		if name == part && (isDeps || part == workspaceRegistryCache) {
			return fmt.Errorf("%q must be a directory", name)
		}
	case tar.TypeDir:
		if name == part && !isDeps && part != workspaceRegistryCache {
			return fmt.Errorf("%q must be a file", name)
		}
	case tar.TypeSymlink:
		if !isDeps || name == part {
			return fmt.Errorf("entry %q is a link; only files inside installed dependencies may be links", name)
		}
		t := h.Linkname
		target := path.Clean(path.Join(path.Dir(name), t))
		if t == "" || path.IsAbs(t) || !strings.HasPrefix(target, part+"/") {
			return fmt.Errorf("link %q points to %q, outside %s", name, t, part)
		}
		c.links[name] = true
	default:
		return fmt.Errorf("entry %q is neither a file, a directory nor a link", name)
	}
	if name != part && !c.seen[part] {
		return fmt.Errorf("entry %q comes before its part %q", name, part)
	}
	c.seen[name] = true
	return nil
}

// complete refuses a tar that lacks one of its parts.
func (c *entryCheck) complete() error {
	for _, p := range c.parts {
		if !c.seen[p] {
			return fmt.Errorf("part %q is missing", p)
		}
	}
	return nil
}

// ReadWorkspaceTar checks every entry of a workspace tar (see entryCheck)
// and, when dest is not "", writes it beneath dest, a new empty directory.
func ReadWorkspaceTar(r io.Reader, parts []string, dest string) error {
	chk := newEntryCheck(parts)
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("the workspace files are damaged: %w", err)
		}
		if err := chk.check(h); err != nil {
			return err
		}
		if dest == "" {
			continue
		}
		p := filepath.Join(dest, filepath.FromSlash(strings.TrimSuffix(h.Name, "/")))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := fs.FileMode(h.Mode) & 0o777
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(p, mode|0o700); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
	return chk.complete()
}

// installParts moves the staged parts into ws/.pml, each replacing what
// was there (a rename within .pml, so each part changes at once). The old
// part goes into staging and is removed with it.
func installParts(ws, staging string, parts []string) error {
	base := filepath.Join(ws, safefs.StateDir)
	if err := safefs.CheckStateDir(ws); err != nil {
		return err
	}
	for i, part := range parts {
		target := filepath.Join(base, filepath.FromSlash(part))
		if strings.HasPrefix(part, "deps/") {
			d := filepath.Join(base, "deps")
			if fi, err := os.Lstat(d); err == nil && !fi.IsDir() {
				return fmt.Errorf("%s is not a directory (a link?); remove it and load again", d)
			} else if err != nil {
				if err := os.Mkdir(d, 0o755); err != nil {
					return err
				}
			}
		}
		if _, err := os.Lstat(target); err == nil {
			if err := os.Rename(target, filepath.Join(staging, fmt.Sprintf(".old-%d", i))); err != nil {
				return fmt.Errorf("cannot replace %s: %w", target, err)
			}
		}
		if err := os.Rename(filepath.Join(staging, filepath.FromSlash(part)), target); err != nil {
			return fmt.Errorf("cannot put %s in place: %w", target, err)
		}
	}
	return nil
}
