//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostileTrustStoreNotPrivateIsRefused: trust records another local user can
// change are that user's grants. pml refuses its state directory or trust
// file when it is group- or world-writable, a symbolic link, or owned by
// someone else (as root, the last case), naming the file and the fix;
// nothing is trusted from it. A private one (pml's own 0700/0600) works.
func TestHostileTrustStoreNotPrivateIsRefused(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, "")
	ws.writeUntrusted(".pml.json", `{"permissions": {"allow": ["shell:exec"]}}`)

	cases := []struct {
		name  string
		setup func(t *testing.T, state string)
		want  []string
	}{
		{"writable directory", func(t *testing.T, state string) {
			mkdir(t, filepath.Join(state, "pml"), 0o777)
		}, []string{filepath.Join("pml") + " holds pml's trust records but is writable by group or others", "chmod go-w"}},
		{"writable file", func(t *testing.T, state string) {
			mkdir(t, filepath.Join(state, "pml"), 0o700)
			write(t, filepath.Join(state, "pml", "trust.json"), `{"version":1,"files":{}}`, 0o666)
		}, []string{"trust.json holds pml's trust records but is writable by group or others", "chmod go-w"}},
		{"symbolic link", func(t *testing.T, state string) {
			elsewhere := t.TempDir()
			if err := os.Symlink(elsewhere, filepath.Join(state, "pml")); err != nil {
				t.Fatal(err)
			}
		}, []string{"is a symbolic link (to ", "replace the link with a real directory"}},
	}
	if os.Geteuid() == 0 {
		cases = append(cases, struct {
			name  string
			setup func(t *testing.T, state string)
			want  []string
		}{"owned by another user", func(t *testing.T, state string) {
			mkdir(t, filepath.Join(state, "pml"), 0o700)
			if err := os.Chown(filepath.Join(state, "pml"), 1000, 1000); err != nil {
				t.Fatal(err)
			}
		}, []string{"is owned by uid 1000, not by you (uid 0)", "chown -R 0 "}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			c.setup(t, state)
			out, code := trustWith(t, ws, state, "--yes")
			if code == 0 {
				t.Fatalf("pml trust --yes with a state directory that is not private: exit 0, want a refusal\n%s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("pml trust's refusal does not say %q:\n%s", w, out)
				}
			}
			if _, err := os.Lstat(filepath.Join(state, "pml", "trust.json")); err == nil && c.name != "writable file" {
				t.Errorf("pml wrote trust records into a state directory it refused")
			}
		})
	}

	// Records planted where another user could write them (pml's own
	// records, then the directory opened to everyone) are not honoured by
	// a session: shell:exec, which they trust, is asked, and pml says why.
	t.Run("a session does not honour them", func(t *testing.T) {
		state := t.TempDir()
		if out, code := trustWith(t, ws, state, "--yes"); code != 0 {
			t.Fatalf("pml trust --yes: exit %d\n%s", code, out)
		}
		if err := os.Chmod(filepath.Join(state, "pml"), 0o777); err != nil {
			t.Fatal(err)
		}
		s := startSession(t, ws, "XDG_STATE_HOME="+state)
		defer s.Close()
		askFor(t, s, "shell:exec", map[string]any{"command": "true"})
		if !s.logs("holds pml's trust records but is writable by group or others", "chmod go-w") {
			t.Errorf("the session does not say why the records are not honoured:\n%s", tail(s.stderr.String()))
		}
	})

	// pml's own directory (made by pml: 0700, 0600) is used.
	state := t.TempDir()
	if out, code := trustWith(t, ws, state, "--yes"); code != 0 {
		t.Fatalf("pml trust --yes with a fresh state directory: exit %d\n%s", code, out)
	}
	if out, code := trustWith(t, ws, state); code != 0 || !strings.Contains(out, "already trusted") {
		t.Errorf("pml trust with its own state directory: exit %d\n%s", code, out)
	}
}

func mkdir(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func write(t *testing.T, p, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}
