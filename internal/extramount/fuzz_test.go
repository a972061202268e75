package extramount

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/pathguard"
)

// FuzzMountSource takes a mount as .pml.json would give it (source,
// target, read-only) and where two links of the host lead (one beside
// the workspace, one inside it). Whatever they hold: no panic; trace
// agrees with filepath.EvalSymlinks; and when a container would get the
// mount, what is bound is a path with no link in it, outside the
// workspace, not strictly inside the writable mount, not ~/.ssh or what
// holds it, a directory or a regular file, and the same once pinned.
func FuzzMountSource(f *testing.F) {
	for _, s := range []struct {
		source, target, link, wsLink string
		ro                           bool
	}{
		{"data", "", "data", "../data", true},
		{"link", "/cache", "data", "/etc", false},
		{"link/f.txt", "", "ws/in", "data", true},
		{"ws/in", "", "data", "data", true},
		{"ws/wslink", "/x", "data", "../rw/sub", true},
		{"rw/sub", "/y", "rw", "rw", true},
		{"link", "", "home/.ssh", "..", true},
		{"link/../data", "/d", "ws/wslink", "../../etc", true},
		{"ws/../data", "/d", "link", "link", true},
		{"/etc", "", "/", "/proc/self/root", true},
		{"rw", "/rw", "rw", "", false},
		{"link/sub", "/z", "rw", "ws", true},
	} {
		f.Add(s.source, s.target, s.link, s.wsLink, s.ro)
	}
	root, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	ws, home, data, rw := filepath.Join(root, "ws"), filepath.Join(root, "home"), filepath.Join(root, "data"), filepath.Join(root, "rw")
	for _, d := range []string{filepath.Join(ws, "in"), filepath.Join(home, ".ssh"), data, filepath.Join(rw, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(data, "f.txt"), []byte("x"), 0o644); err != nil {
		f.Fatal(err)
	}
	env := func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
	link, wsLink := filepath.Join(root, "link"), filepath.Join(ws, "wslink")
	f.Fuzz(func(t *testing.T, source, target, to, wsTo string, ro bool) {
		for l, to := range map[string]string{link: to, wsLink: wsTo} {
			_ = os.Remove(l)
			if to != "" && !strings.ContainsRune(to, 0) {
				if !filepath.IsAbs(to) && !strings.HasPrefix(to, ".") {
					to = filepath.Join(root, to)
				}
				_ = os.Symlink(to, l)
			}
		}
		if !filepath.IsAbs(source) {
			source = filepath.Join(root, source)
		}
		item := map[string]any{"source": source, "read_only": ro}
		if target != "" {
			item["target"] = target
		}
		doc, _ := json.Marshal(map[string]any{"sandbox": map[string]any{"mounts": []any{item, map[string]any{"source": rw, "target": "/rw", "read_only": false}}}})
		cfg, err := config.Parse(filepath.Join(ws, config.FileName), doc)
		if err != nil {
			return
		}
		if len(cfg.Sandbox.Mounts) == 0 {
			return
		}
		src := cfg.Sandbox.Mounts[0].Source
		if real, _, terr := trace(src); terr == nil {
			if want, err := filepath.EvalSymlinks(src); err == nil && want != real {
				t.Fatalf("trace(%q) = %q, filepath.EvalSymlinks = %q", src, real, want)
			}
		}
		set := New(ws, cfg.Sandbox.Mounts, env)
		got, err := set.Tool(false)
		if err != nil {
			if !errors.Is(err, ErrGone) && !errors.Is(err, ErrRefused) {
				t.Fatalf("an error of no kind: %v", err)
			}
			return
		}
		for _, m := range got {
			checkBound(t, m.Source, ws, rw, home)
		}
		// Pinned as trust would pin it now: the same mounts again.
		pinned := append([]config.Mount(nil), cfg.Sandbox.Mounts...)
		for i := range pinned {
			pin, err := Measure(pinned[i].Source)
			if err != nil {
				t.Fatalf("Measure(%q) after a mount of it: %v", pinned[i].Source, err)
			}
			pinned[i].Pin = pin
		}
		again, err := New(ws, pinned, env).Tool(false)
		if err != nil || len(again) != len(got) {
			t.Fatalf("pinned as it is: %v, %v (unpinned: %v)", again, err, got)
		}
		for i := range got {
			if again[i] != got[i] {
				t.Fatalf("pinned as it is: %+v, unpinned %+v", again[i], got[i])
			}
		}
	})
}

// checkBound fails unless p is what a bind mount may name.
func checkBound(t *testing.T, p, ws, rw, home string) {
	t.Helper()
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		t.Fatalf("bound %q: not an absolute clean path", p)
	}
	for cur := p; ; cur = filepath.Dir(cur) {
		fi, err := os.Lstat(cur)
		if err != nil {
			t.Fatalf("bound %q: %v", p, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			t.Fatalf("bound %q: %s is a link", p, cur)
		}
		if cur == filepath.Dir(cur) {
			break
		}
	}
	ssh := filepath.Join(home, ".ssh")
	switch {
	case pathguard.Within(ws, p):
		t.Fatalf("bound %q: inside the workspace", p)
	case p != rw && pathguard.Within(rw, p):
		t.Fatalf("bound %q: inside the writable mount %s", p, rw)
	case pathguard.Within(ssh, p) || pathguard.Within(p, ssh):
		t.Fatalf("bound %q: ~/.ssh", p)
	}
	fi, err := os.Stat(p)
	if err != nil || !(fi.IsDir() || fi.Mode().IsRegular()) {
		t.Fatalf("bound %q: %v %v", p, fi, err)
	}
}
