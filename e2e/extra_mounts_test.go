//go:build linux

package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// grantedDir is a directory outside every workspace holding f.txt, as a
// person's data directory would be: readable by all, owned by them.
func grantedDir(t *testing.T, content string) (dir, file string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, _ = filepath.EvalSymlinks(dir)
	file = filepath.Join(dir, "f.txt")
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

func mountsConfig(dir string) string {
	return fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"mounts": [%q]}}`, dir)
}

func TestAGrantedDirectoryIsReadByTheToolsAndNotWritten(t *testing.T) {
	data, file := grantedDir(t, "from the granted directory")
	ws := newWorkspace(t, mountsConfig(data))

	code, out, errOut := runPML(t, ws, "call", "filesystem:read_file", fmt.Sprintf(`{"path": %q}`, file))
	if code != 0 || !strings.Contains(out, "from the granted directory") {
		t.Fatalf("filesystem:read_file of a granted file: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runPML(t, ws, "call", "shell:exec", fmt.Sprintf(`{"command": "cat %s"}`, file))
	if code != 0 || !strings.Contains(out, "from the granted directory") {
		t.Fatalf("shell:exec cat of a granted file: exit %d\n%s\n%s", code, out, errOut)
	}

	// Read-only: pml refuses a tool's write before any container, and
	// the mount refuses the shell's.
	code, out, errOut = runPML(t, ws, "call", "filesystem:write_file", fmt.Sprintf(`{"path": %q, "content": "x"}`, filepath.Join(data, "new.txt")))
	if code == 0 || !strings.Contains(out+errOut, "is in the read-only mount "+data) {
		t.Fatalf("filesystem:write_file in the read-only mount: exit %d\n%s\n%s", code, out, errOut)
	}
	_, out, errOut = runPML(t, ws, "call", "shell:exec", fmt.Sprintf(`{"command": "echo x > %s/by-shell"}`, data))
	if !strings.Contains(out+errOut, "Read-only file system") {
		t.Fatalf("shell:exec writing the read-only mount: %s\n%s", out, errOut)
	}
	for _, n := range []string{"new.txt", "by-shell"} {
		if _, err := os.Stat(filepath.Join(data, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was written in the read-only mount: %v", n, err)
		}
	}

	// A link in the granted directory to a directory not granted (as
	// ~/.ssh would be) widens nothing: pml refuses the path, and in the
	// container the link leads nowhere.
	secret, _ := grantedDir(t, "not granted")
	if err := os.Symlink(secret, filepath.Join(data, "keys")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runPML(t, ws, "call", "filesystem:read_file", fmt.Sprintf(`{"path": %q}`, filepath.Join(data, "keys", "f.txt")))
	if code == 0 || strings.Contains(out, "not granted") || !strings.Contains(out+errOut, "leads outside the extra mount "+data) {
		t.Fatalf("filesystem:read_file through a link out of the mount: exit %d\n%s\n%s", code, out, errOut)
	}
	_, out, errOut = runPML(t, ws, "call", "shell:exec", fmt.Sprintf(`{"command": "cat %s/keys/f.txt"}`, data))
	if strings.Contains(out, "not granted") || !strings.Contains(out+errOut, "No such file") {
		t.Fatalf("shell:exec through a link out of the mount: %s\n%s", out, errOut)
	}

	// Gone at call time: pml says which and what to do, not the engine.
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runPML(t, ws, "call", "shell:exec", `{"command": "true"}`)
	if code == 0 || !strings.Contains(out+errOut, data+" (sandbox.mounts) is not on this host any more") || strings.Contains(out+errOut, "bind source path") {
		t.Fatalf("shell:exec with the granted directory gone: exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestAnUntrustedMountIsNotMounted(t *testing.T) {
	data, file := grantedDir(t, "not for untrusted policies")
	// The person trusted a policy that allows the tools; the mount came
	// later, in a content nobody trusted.
	ws := newWorkspace(t, `{"permissions": {"allow": ["*"]}}`)
	ws.writeUntrusted(".pml.json", mountsConfig(data))

	code, out, errOut := runPML(t, ws, "call", "filesystem:read_file", fmt.Sprintf(`{"path": %q}`, file))
	if code == 0 || strings.Contains(out, "not for untrusted policies") || !strings.Contains(out+errOut, "outside the workspace") {
		t.Fatalf("filesystem:read_file under an untrusted mount: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runPML(t, ws, "call", "shell:exec", fmt.Sprintf(`{"command": "cat %s"}`, file))
	if strings.Contains(out, "not for untrusted policies") || !strings.Contains(out+errOut, "No such file") {
		t.Fatalf("shell:exec cat under an untrusted mount: exit %d\n%s\n%s", code, out, errOut)
	}
	// Once the person trusts this content, the same call sees the file.
	ws.trust()
	code, out, errOut = runPML(t, ws, "call", "shell:exec", fmt.Sprintf(`{"command": "cat %s"}`, file))
	if code != 0 || !strings.Contains(out, "not for untrusted policies") {
		t.Fatalf("shell:exec cat once the mount is trusted: exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestAServersOwnMountIsThatServersOnly(t *testing.T) {
	own := filepath.Join(t.TempDir(), "own")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	ws := newWorkspace(t, "")
	ws.chown(own)
	ws.write(".pml.json", fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {
  "mine": {"image": %q, "sandbox": {"mounts": [{"source": %q, "target": "/own", "read_only": false}]}},
  "other": {"image": %q}}}`, probeImage(t), own, probeImage(t)))
	s := startSession(t, ws)

	if out, _ := s.call(t, "mine:write", map[string]any{"text": "/own/by-mine"}); out != "ok" {
		t.Fatalf("mine:write in its own mount: %q\n%s", out, s.stderr.String())
	}
	if _, err := os.Stat(filepath.Join(own, "by-mine")); err != nil {
		t.Fatalf("the server's write did not reach the host directory: %v", err)
	}
	if out, _ := s.call(t, "other:write", map[string]any{"text": "/own/by-other"}); !strings.HasPrefix(out, "error:") {
		t.Fatalf("other:write saw mine's mount: %q", out)
	}
	if out, _ := s.call(t, "shell:exec", map[string]any{"command": "ls /own"}); !strings.Contains(out, "No such file") {
		t.Fatalf("shell:exec saw the server's mount: %q", out)
	}
	if _, err := os.Stat(filepath.Join(own, "by-other")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("another server wrote the mount: %v", err)
	}
}
