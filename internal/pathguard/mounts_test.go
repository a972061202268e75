package pathguard

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mountLayout is a workspace, a granted directory outside it (data, with
// a file and a link to a secret directory), and the secret directory.
func mountLayout(t *testing.T) (ws, data, secret string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, data, secret = filepath.Join(root, "ws"), filepath.Join(root, "data"), filepath.Join(root, "ssh")
	for _, d := range []string{ws, filepath.Join(data, "sub"), secret} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(data, "sub", "f.txt"), filepath.Join(secret, "id_rsa"), filepath.Join(ws, "a.txt")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(data, "keys")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/f.txt", filepath.Join(data, "near")); err != nil {
		t.Fatal(err)
	}
	return ws, data, secret
}

func TestResolveInAllowsTheExtraMountsAndNothingMore(t *testing.T) {
	ws, data, secret := mountLayout(t)
	ro := []Mount{{Path: data, Host: data, ReadOnly: true}}
	moved := []Mount{{Path: "/data", Host: data}}
	cases := []struct {
		name   string
		mounts []Mount
		p      string
		write  bool
		want   string
		kind   error
	}{
		{"a workspace path is as before", ro, "a.txt", false, filepath.Join(ws, "a.txt"), nil},
		{"a file in a mount is allowed", ro, filepath.Join(data, "sub", "f.txt"), false, filepath.Join(data, "sub", "f.txt"), nil},
		{"the mount itself is allowed", ro, data, false, data, nil},
		{"a link that stays in the mount is followed", ro, filepath.Join(data, "near"), false, filepath.Join(data, "sub", "f.txt"), nil},
		{"a link in the mount to a secret directory is refused", ro, filepath.Join(data, "keys", "id_rsa"), false, "", ErrOutside},
		{"dot-dot out of the mount is refused", ro, filepath.Join(data, "..", "ssh", "id_rsa"), false, "", ErrOutside},
		{"the secret directory itself is refused", ro, filepath.Join(secret, "id_rsa"), false, "", ErrOutside},
		{"a write in a read-only mount is refused", ro, filepath.Join(data, "new.txt"), true, "", ErrReadOnly},
		{"a write in a writable mount is allowed", moved, "/data/new.txt", true, "/data/new.txt", nil},
		{"a mount at another path is read at that path", moved, "/data/sub/f.txt", false, "/data/sub/f.txt", nil},
		{"without mounts a path outside is refused", nil, filepath.Join(data, "sub", "f.txt"), false, "", ErrOutside},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveIn(ws, tc.mounts, tc.p, tc.write)
			if tc.kind != nil {
				if !errors.Is(err, tc.kind) {
					t.Fatalf("ResolveIn(%q) = %q, %v; want %v", tc.p, got, err, tc.kind)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ResolveIn(%q) = %q, %v; want %q", tc.p, got, err, tc.want)
			}
		})
	}
}

func TestResolveInSaysWhereAPathMayBe(t *testing.T) {
	ws, data, _ := mountLayout(t)
	_, err := ResolveIn(ws, []Mount{{Path: data, ReadOnly: true}}, "/etc/passwd", false)
	if err == nil || !strings.Contains(err.Error(), "outside the workspace "+ws+" and the extra mounts ("+data+")") {
		t.Fatalf("got %v", err)
	}
	_, err = ResolveIn(ws, []Mount{{Path: data, ReadOnly: true}}, filepath.Join(data, "x"), true)
	if err == nil || !strings.Contains(err.Error(), "read-only mount "+data) || !strings.Contains(err.Error(), `"read_only": false`) {
		t.Fatalf("got %v", err)
	}
}

// FuzzResolveIn: whatever the path, what ResolveIn accepts lies in the
// workspace or in a mount, and a write is never accepted in a read-only
// one.
func FuzzResolveIn(f *testing.F) {
	for _, s := range []string{"a.txt", "/data/sub/f.txt", "/data/keys/id_rsa", "/data/../ssh/id_rsa", "/data/near", "/data", "/moved/x", "/moved/../data/x", "", "//data", "/data/sub/../../ws/a.txt"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	root, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	ws, data, secret := filepath.Join(root, "ws"), filepath.Join(root, "data"), filepath.Join(root, "ssh")
	for _, d := range []string{ws, filepath.Join(data, "sub"), secret} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(data, "keys")); err != nil {
		f.Fatal(err)
	}
	mounts := []Mount{{Path: data, Host: data, ReadOnly: true}, {Path: "/moved", Host: filepath.Join(data, "sub")}}
	f.Fuzz(func(t *testing.T, p string, write bool) {
		// The seeds name the mount as /data: put it where it is.
		p = strings.Replace(p, "/data", data, 1)
		got, err := ResolveIn(ws, mounts, p, write)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("ResolveIn(%q) returned an untyped error: %v", p, err)
			}
			return
		}
		switch {
		case Within(ws, got):
		case Within(data, got) && !write:
		case Within("/moved", got):
		default:
			t.Fatalf("ResolveIn(%q, write=%v) = %q: outside the workspace and the mounts, or a write in the read-only one", p, write, got)
		}
		if Within(secret, got) {
			t.Fatalf("ResolveIn(%q) = %q: in the secret directory", p, got)
		}
	})
}
