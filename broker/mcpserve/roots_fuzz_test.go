package mcpserve

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRootDir takes a root a client sends (roots/list) and a path below
// it. Whatever they are: no panic; a root pml takes is an absolute,
// clean directory name; a file:// URI of a real directory names that
// directory, and a directory lies within itself and holds what is below.
func FuzzRootDir(f *testing.F) {
	for _, s := range [][2]string{
		{"file:///tmp", "a"}, {"file://localhost/tmp/x%20y", "b/c"}, {"file://host/tmp", ""}, {"http://x/y", "."},
		{"file:relative", "../x"}, {"file:///../../etc", "/"}, {"file:///a/%2e%2e/b", ".."}, {"%zz", ""}, {"file://[::1]/x", "x"},
		{"FILE:///tmp", "..a"}, {"file:///tmp/\x00", "a\x00"},
	} {
		f.Add(s[0], s[1])
	}
	dir, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, uri, sub string) {
		if p, ok := rootDir(uri); ok {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p {
				t.Fatalf("root %q is taken as %q, not an absolute clean path", uri, p)
			}
			if !within(p, p) || !related(p, p) {
				t.Fatalf("%q is not within itself", p)
			}
			if c := filepath.Join(p, sub); within(p, c) != related(p, c) && !within(c, p) {
				t.Fatalf("within(%q, %q) = %v but related = %v", p, c, within(p, c), related(p, c))
			}
		}
		// The URI a client writes for a real directory below dir.
		real := filepath.Join(dir, filepath.Base(filepath.Clean("/"+sub)))
		if err := os.MkdirAll(real, 0o755); err != nil {
			return
		}
		u := (&url.URL{Scheme: "file", Path: real}).String()
		if p, ok := rootDir(u); !ok || p != real {
			t.Fatalf("%s (for %q) is taken as %q, %v", u, real, p, ok)
		}
		if !within(dir, real) {
			t.Fatalf("%q is not within %q", real, dir)
		}
	})
}
