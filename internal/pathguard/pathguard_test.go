package pathguard

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// layout builds a workspace with the awkward shapes path checks get wrong,
// next to a sibling directory that must stay unreachable. It returns the
// resolved workspace and the outside directory.
func layout(t testing.TB) (ws, out string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws = filepath.Join(root, "ws")
	out = filepath.Join(root, "outside")
	for _, d := range []string{
		ws, out,
		filepath.Join(ws, "dir", "sub"),
		filepath.Join(ws, "ünïcödé"),
		filepath.Join(root, "ws2"),
	} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{
		filepath.Join(ws, "a.txt"),
		filepath.Join(ws, "dir", "b.txt"),
		filepath.Join(ws, "ünïcödé", "日本.txt"),
		filepath.Join(ws, "with space.txt"),
		filepath.Join(out, "secret"),
		filepath.Join(root, "ws2", "x"),
	} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"link-in":          "dir",                             // relative, stays inside
		"link-abs-in":      filepath.Join(ws, "dir", "b.txt"), // absolute, inside
		"link-out":         out,                               // absolute, outside
		"link-out-rel":     "../outside",                      // relative, outside
		"link-ws2":         "../ws2",                          // prefix trick
		"dangling-in":      "not-yet.txt",                     // target missing, inside
		"dangling-out":     filepath.Join(out, "new.txt"),     // target missing, outside
		"dangling-chain":   "dangling-out",                    // link → dangling link → outside
		"loop1":            "loop2",                           // loop
		"loop2":            "loop1",                           //
		"self":             "self",                            // one-link loop
		"dir/up":           "..",                              // back to the workspace root
		"dir/up2":          "../..",                           // above the workspace
		"dir/sub/deep-out": "../../../outside/secret",         // outside, from deep down
		"to-root":          "/",                               // the filesystem root
		"to-etc-passwd":    "/etc/passwd",                     // classic
		"to-proc1-cwd":     "/proc/1/cwd",                     // unreadable outside: refused unseen
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	return ws, out
}

func TestResolve(t *testing.T) {
	ws, _ := layout(t)
	in := func(rel string) string { return filepath.Join(ws, rel) }
	cases := []struct {
		name string
		path string
		want string // resolved path; empty when an error is expected
		kind error
	}{
		// inside, plain
		{"relative file", "a.txt", in("a.txt"), nil},
		{"dot slash", "./a.txt", in("a.txt"), nil},
		{"absolute inside", in("dir/b.txt"), in("dir/b.txt"), nil},
		{"workspace itself", ws, ws, nil},
		{"dot", ".", ws, nil},
		{"trailing slash dir", "dir/", in("dir"), nil},
		{"trailing slash absolute", ws + "/", ws, nil},
		{"double slashes", "dir//sub///", in("dir/sub"), nil},
		{"dotdot that stays inside", "dir/sub/../b.txt", in("dir/b.txt"), nil},
		{"missing file inside", "new/deeper/file.txt", in("new/deeper/file.txt"), nil},
		{"unicode dir", "ünïcödé/日本.txt", in("ünïcödé/日本.txt"), nil},
		{"space in name", "with space.txt", in("with space.txt"), nil},
		{"name starting with dots", "..hidden", in("..hidden"), nil},
		{"symlink in the middle inside", "link-in/b.txt", in("dir/b.txt"), nil},
		{"absolute symlink inside", "link-abs-in", in("dir/b.txt"), nil},
		{"dangling symlink inside", "dangling-in", in("not-yet.txt"), nil},
		{"symlink to workspace root", "dir/up/a.txt", in("a.txt"), nil},
		{"new file under symlinked dir", "link-in/new.txt", in("dir/new.txt"), nil},

		// outside
		{"dotdot", "../outside/secret", "", ErrOutside},
		{"dotdot at start only", "..", "", ErrOutside},
		{"dotdot after dir", "dir/../../outside", "", ErrOutside},
		{"absolute outside", "/etc/passwd", "", ErrOutside},
		{"filesystem root", "/", "", ErrOutside},
		{"sibling with shared prefix", filepath.Join(filepath.Dir(ws), "ws2", "x"), "", ErrOutside},
		{"symlink out absolute", "link-out/secret", "", ErrOutside},
		{"symlink out relative", "link-out-rel/secret", "", ErrOutside},
		{"symlink to prefix sibling", "link-ws2/x", "", ErrOutside},
		{"symlink to root", "to-root/etc/passwd", "", ErrOutside},
		{"symlink to /etc/passwd", "to-etc-passwd", "", ErrOutside},
		{"symlink in the middle going up", "dir/up2/outside/secret", "", ErrOutside},
		{"deep symlink out", "dir/sub/deep-out", "", ErrOutside},
		{"dangling symlink out", "dangling-out", "", ErrOutside},
		{"chain to dangling out", "dangling-chain", "", ErrOutside},
		{"new file under outside link", "link-out/new.txt", "", ErrOutside},
		{"symlink to an unreadable outside link", "to-proc1-cwd", "", ErrOutside},
		{"below a symlink to an unreadable outside link", "to-proc1-cwd/etc/passwd", "", ErrOutside},

		// invalid
		{"empty", "", "", ErrEmpty},
		{"blank", "   ", "", ErrEmpty},
		{"NUL byte", "a.txt\x00../../etc/passwd", "", ErrInvalid},
		{"too long", strings.Repeat("a/", MaxPath), "", ErrInvalid},
		{"symlink loop", "loop1", "", ErrInvalid},
		{"symlink loop in the middle", "loop1/x", "", ErrInvalid},
		{"self loop", "self", "", ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Resolve(ws, c.path)
			if c.kind != nil {
				if err == nil {
					t.Fatalf("Resolve(%q) = %q, want error %v", c.path, got, c.kind)
				}
				if !errors.Is(err, c.kind) {
					t.Fatalf("Resolve(%q) error = %v, want kind %v", c.path, err, c.kind)
				}
				var pe *Error
				if !errors.As(err, &pe) || pe.Reason == "" {
					t.Fatalf("error %v does not say why", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q): %v", c.path, err)
			}
			if got != c.want {
				t.Fatalf("Resolve(%q) = %q, want %q", c.path, got, c.want)
			}
		})
	}
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
}

func TestResolveWorkspaceGivenThroughSymlink(t *testing.T) {
	ws, _ := layout(t)
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(ws, alias); err != nil {
		t.Fatal(err)
	}
	got, err := Resolve(alias, filepath.Join(alias, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(ws, "a.txt"); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if _, err := Resolve(alias, filepath.Join(alias, "link-out", "secret")); !errors.Is(err, ErrOutside) {
		t.Fatalf("outside link through an aliased workspace: %v", err)
	}
}

func TestResolveRelativeWorkspaceRefused(t *testing.T) {
	if _, err := Resolve("relative/ws", "a.txt"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
}

func TestErrorMessageNamesPathAndWorkspace(t *testing.T) {
	ws, _ := layout(t)
	_, err := Resolve(ws, "/etc/passwd")
	msg := err.Error()
	if !strings.Contains(msg, "/etc/passwd") || !strings.Contains(msg, ws) {
		t.Fatalf("message %q should name the path and the workspace", msg)
	}
}

func TestWithin(t *testing.T) {
	cases := []struct {
		ws, p string
		want  bool
	}{
		{"/ws", "/ws", true},
		{"/ws", "/ws/a", true},
		{"/ws", "/ws2", false},
		{"/ws", "/w", false},
		{"/ws", "/", false},
		{"/ws/", "/ws/a", true},
		{"/", "/anything", true},
		{"/ws", "/ws/../etc", false},
	}
	for _, c := range cases {
		if got := Within(c.ws, c.p); got != c.want {
			t.Errorf("Within(%q, %q) = %v, want %v", c.ws, c.p, got, c.want)
		}
	}
}

// FuzzResolve checks the one property that matters for any input: Resolve
// either refuses the path or returns an absolute, clean path inside the
// workspace whose existing prefix, resolved again, is still inside.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{
		"a.txt", "../outside/secret", "link-out/secret", "dir/up2/outside",
		"loop1", "dangling-out", "/etc/passwd", "dir/../../", "ünïcödé/日本.txt",
		"", ".", "//", "link-in/../../outside", "a\x00b",
	} {
		f.Add(s)
	}
	ws, _ := layout(f)
	f.Fuzz(func(t *testing.T, p string) {
		got, err := Resolve(ws, p)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Resolve(%q) returned an untyped error: %v", p, err)
			}
			return
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got {
			t.Fatalf("Resolve(%q) = %q: not absolute and clean", p, got)
		}
		if !Within(ws, got) {
			t.Fatalf("Resolve(%q) = %q: outside %s", p, got, ws)
		}
		existing := got
		for {
			if _, err := os.Lstat(existing); err == nil {
				break
			}
			existing = filepath.Dir(existing)
		}
		if real, err := filepath.EvalSymlinks(existing); err == nil && !Within(ws, real) {
			t.Fatalf("Resolve(%q) = %q, whose existing prefix resolves to %q outside %s", p, got, real, ws)
		}
	})
}
