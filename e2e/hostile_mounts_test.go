//go:build linux

package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 50, finding 2: an extra mount's source was resolved through its
// links again for every container, so a container that could write where
// the source lies (the workspace, a writable mount) re-pointed it, and the
// next container got whatever host directory the link named: read-write if
// the grant was. These tests make the swap and check that no later
// container, and no filesystem tool, sees the directory it names.

// TestHostileShellReplacesATrustedMountSourceInTheWorkspace: a source
// inside the workspace, trusted read-write at /data, is replaced by an
// approved shell:exec with a link to another directory of the host (as a
// secret of another project would be). No later call may read or write it.
func TestHostileShellReplacesATrustedMountSourceInTheWorkspace(t *testing.T) {
	secret, _ := grantedDir(t, "a secret of another project")
	chownTree(t, secret)
	ws := newWorkspace(t, "")
	ws.writeUntrusted("data/f.txt", "project data")
	src := ws.path("data")
	ws.write(".pml.json", fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"mounts": [{"source": %q, "target": "/data", "read_only": false}]}}`, src))

	// pml refuses the source outright (the file is not loaded); before
	// the fix the first call mounted it.
	code, out, errOut := runPML(t, ws, "call", "shell:exec", `{"command": "cat /data/f.txt"}`)
	refusedHere := code != 0 && strings.Contains(out+errOut, src+" cannot be mounted: it is inside the workspace "+ws.Dir)
	t.Logf("first call: exit %d, refused as inside the workspace: %v", code, refusedHere)

	// The approved command: replace the source by a link. When pml
	// refused to run it (the policy is not loaded), the test makes the
	// same change: any earlier container with the workspace writable
	// could have.
	swap := fmt.Sprintf("rm -rf %s && ln -s %s %s", src, secret, src)
	_, out, errOut = runPML(t, ws, "call", "shell:exec", fmt.Sprintf(`{"command": %q}`, swap))
	if fi, err := os.Lstat(src); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Logf("shell:exec did not swap the source (%s%s): swapped by the test", out, errOut)
		if err := exec.Command("sh", "-c", swap).Run(); err != nil {
			t.Fatal(err)
		}
	}

	code, out, errOut = runPML(t, ws, "call", "shell:exec", fmt.Sprintf(`{"command": "cat /data/f.txt; echo planted > /data/planted; ls %s"}`, secret))
	if strings.Contains(out, "a secret of another project") {
		t.Fatalf("shell:exec read the directory the swapped source leads to: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(secret, "planted")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("shell:exec wrote into the directory the swapped source leads to: %v", err)
	}
	code, out, errOut = runPML(t, ws, "call", "filesystem:read_file", `{"path": "/data/f.txt"}`)
	if strings.Contains(out, "a secret of another project") {
		t.Fatalf("filesystem:read_file read the directory the swapped source leads to: exit %d\n%s\n%s", code, out, errOut)
	}
	// Refused, saying which mount and what to do.
	if code == 0 || !strings.Contains(out+errOut, src+" cannot be mounted: it is inside the workspace "+ws.Dir) || !strings.Contains(out+errOut, "mount a directory outside it") {
		t.Fatalf("want a refusal naming the mount: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestHostileShellRepointsALinkOnAServersMountPath: a server's own
// writable mount whose source is outside the workspace, but reached
// through a link inside it (the person's ~/data → the project's hop →
// a data directory). An approved shell:exec re-points the hop at another
// host directory (as ~/.local/bin would be); the server's next container
// must not get it.
func TestHostileShellRepointsALinkOnAServersMountPath(t *testing.T) {
	data, _ := grantedDir(t, "granted")
	chownTree(t, data)
	bin, _ := grantedDir(t, "not granted")
	chownTree(t, bin)
	ws := newWorkspace(t, "")
	hop := ws.path("hop")
	if err := os.Symlink(data, hop); err != nil {
		t.Fatal(err)
	}
	ws.chown(hop)
	via := filepath.Join(filepath.Dir(data), "via")
	if err := os.Symlink(hop, via); err != nil {
		t.Fatal(err)
	}
	ws.write(".pml.json", fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {
  "mine": {"image": %q, "sandbox": {"mounts": [{"source": %q, "target": "/v", "read_only": false}]}}}}`, probeImage(t), via))

	code, out, errOut := runPML(t, ws, "call", "mine:write", `{"text": "/v/first"}`)
	t.Logf("before the swap: exit %d: %s%s", code, out, errOut)

	swap := fmt.Sprintf("rm %s && ln -s %s %s", hop, bin, hop)
	if code, out, errOut := runPML(t, ws, "call", "shell:exec", fmt.Sprintf(`{"command": %q}`, swap)); code != 0 {
		t.Fatalf("the approved shell:exec: exit %d\n%s\n%s", code, out, errOut)
	}
	if got, _ := os.Readlink(hop); got != bin {
		t.Fatalf("the hop leads to %q, want %q", got, bin)
	}

	code, out, errOut = runPML(t, ws, "call", "mine:write", `{"text": "/v/planted"}`)
	if _, err := os.Stat(filepath.Join(bin, "planted")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the server wrote into the directory the re-pointed link leads to (exit %d: %s%s): %v", code, out, errOut, err)
	}
	if code == 0 || !strings.Contains(out+errOut, "(mcps.mine.sandbox.mounts) cannot be mounted: it is inside the workspace") {
		t.Fatalf("want a refusal naming the server's mount: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestAMountSourceReplacedSinceTrustIsRefused: the directory at a trusted
// source is replaced by another (same path, another inode) after `pml
// trust`; until the person trusts again, no container gets it.
func TestAMountSourceReplacedSinceTrustIsRefused(t *testing.T) {
	data, file := grantedDir(t, "as trusted")
	ws := newWorkspace(t, mountsConfig(data))
	if code, out, errOut := runPML(t, ws, "call", "shell:exec", fmt.Sprintf(`{"command": "cat %s"}`, file)); code != 0 || !strings.Contains(out, "as trusted") {
		t.Fatalf("as trusted: exit %d\n%s\n%s", code, out, errOut)
	}
	if err := os.Rename(data, data+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("swapped in"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, call := range [][2]string{
		{"shell:exec", fmt.Sprintf(`{"command": "cat %s"}`, file)},
		{"filesystem:read_file", fmt.Sprintf(`{"path": %q}`, file)},
	} {
		code, out, errOut := runPML(t, ws, "call", call[0], call[1])
		if code == 0 || strings.Contains(out, "swapped in") || !strings.Contains(out+errOut, data+" (sandbox.mounts) is another directory than the one you trusted") || !strings.Contains(out+errOut, "run `pml trust` again") {
			t.Fatalf("%s after the source was replaced: exit %d\n%s\n%s", call[0], code, out, errOut)
		}
	}
	// Trusted again, it is mounted again.
	ws.trust()
	if code, out, errOut := runPML(t, ws, "call", "shell:exec", fmt.Sprintf(`{"command": "cat %s"}`, file)); code != 0 || !strings.Contains(out, "swapped in") {
		t.Fatalf("trusted again: exit %d\n%s\n%s", code, out, errOut)
	}
}

// chownTree gives p to the containers' user, as the person's own
// directory would be.
func chownTree(t *testing.T, p string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	if err := filepath.Walk(p, func(q string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(q, testUID, testUID)
	}); err != nil {
		t.Fatal(err)
	}
}
