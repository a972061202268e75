package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzResolve starts pml in a directory given relative to a project tree
// (root/proj holds .git, root/proj/a/b is below it, root/loose holds no
// marker), or with PML_WORKSPACE set to it. Whatever the path: no panic;
// the workspace found is an absolute directory with symlinks resolved,
// holding the current directory; found by a marker, it holds that marker,
// and no directory between the two holds one.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"proj", "proj/a/b", "proj/a/../a/b/", "loose", "../../..", "proj/link", "nope", "", ".", "proj/a/b/../../../loose", "/"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	root, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	for _, d := range []string{"proj/.git", "proj/a/b", "loose"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "loose"), filepath.Join(root, "proj", "link")); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, rel string, viaEnv bool) {
		if strings.ContainsRune(rel, 0) {
			return
		}
		dir := filepath.Join(root, rel)
		env := func(string) string { return "" }
		cwd := dir
		if viaEnv {
			env = func(k string) string {
				if k == "PML_WORKSPACE" {
					return dir
				}
				return ""
			}
			cwd = root
		}
		r, err := Resolve(env, cwd)
		if err != nil {
			return
		}
		if !filepath.IsAbs(r.Dir) || filepath.Clean(r.Dir) != r.Dir {
			t.Fatalf("%q: workspace %q is not absolute and clean", rel, r.Dir)
		}
		if st, err := os.Stat(r.Dir); err != nil || !st.IsDir() {
			t.Fatalf("%q: workspace %q is no directory (%v)", rel, r.Dir, err)
		}
		if real, err := filepath.EvalSymlinks(r.Dir); err != nil || real != r.Dir {
			t.Fatalf("%q: workspace %q has a link in it (%q)", rel, r.Dir, real)
		}
		start, err := filepath.EvalSymlinks(cwd)
		if viaEnv {
			start, err = filepath.EvalSymlinks(dir)
		}
		if err != nil {
			t.Fatalf("%q: resolved to %q, but it does not exist: %v", rel, r.Dir, err)
		}
		if r.Source == "cwd" || viaEnv {
			if r.Dir != start {
				t.Fatalf("%q (%s): workspace %q, not %q", rel, r.Source, r.Dir, start)
			}
			return
		}
		m, ok := strings.CutPrefix(r.Source, "marker ")
		if !ok || !slices.Contains(Markers, m) {
			t.Fatalf("%q: source %q", rel, r.Source)
		}
		if _, err := os.Lstat(filepath.Join(r.Dir, m)); err != nil {
			t.Fatalf("%q: workspace %q has no %s", rel, r.Dir, m)
		}
		relTo, err := filepath.Rel(r.Dir, start)
		if err != nil || relTo == ".." || strings.HasPrefix(relTo, "../") {
			t.Fatalf("%q: workspace %q does not hold %q", rel, r.Dir, start)
		}
		for d := start; d != r.Dir; d = filepath.Dir(d) {
			for _, mk := range Markers {
				if _, err := os.Lstat(filepath.Join(d, mk)); err == nil {
					t.Fatalf("%q: %q holds %s, nearer than %q", rel, d, mk, r.Dir)
				}
			}
		}
	})
}
