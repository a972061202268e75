//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestASharedPathTheVMDoesNotSeeIsProven: sandbox.shared_paths is proven,
// not trusted (issue 57). The VM-like engine's real share and a directory
// of this machine the VM does not see (it has its own of that name, with
// a file of its own) are both listed; a workspace under the unseen one is
// refused with the path and the engine's file-sharing setting, never
// mounted as the VM's files, and pml doctor names it; a workspace under
// the real share works.
func TestASharedPathTheVMDoesNotSeeIsProven(t *testing.T) {
	f := sharedVMEngine(t)
	cache, err := os.MkdirTemp(vmShare(f), "cache-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(cache) })
	unseen := t.TempDir()
	env := []string{"DOCKER_HOST=" + f.Host(), "PML_SANDBOX_SHARED_PATHS=" + vmShare(f) + "," + unseen, "PML_CACHE_DIR=" + cache}

	ws := &workspace{t: t, Dir: filepath.Join(unseen, "ws")}
	if err := os.MkdirAll(ws.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ws.write("notes.txt", "this machine's notes")
	inVM(t, f, ws.path("notes.txt"), "the VM's notes")
	t.Cleanup(func() { f.RemoveContainersOf(t, ws.Dir) })

	r := runCLI(t, ws.Dir, env, "", "call", "filesystem:read_file", `{"path": "notes.txt"}`)
	out := callJSON(t, r)
	if strings.Contains(out.Text, "the VM's notes") {
		t.Fatalf("pml read the VM's file as the workspace's, trusting sandbox.shared_paths: %q", out.Text)
	}
	if r.code == 0 || !strings.Contains(out.Text, "cannot see "+ws.Dir) || !strings.Contains(out.Text, "lists "+unseen) || !strings.Contains(out.Text, "file-sharing setting") {
		t.Errorf("exit %d, want a refusal naming %s and the engine's file-sharing setting: %q\n%s", r.code, unseen, out.Text, r.stderr)
	}

	t.Logf("refused: %s", out.Text)
	d := runCLI(t, ws.Dir, env, "", "doctor", "--format", "json")
	if st, detail, fix := doctorCheck(t, d, "shared paths"); st == "ok" || !strings.Contains(detail, unseen) || !strings.Contains(fix, "file-sharing setting") {
		t.Errorf("doctor's shared paths: %s %q (fix %q)", st, detail, fix)
	}
	if _, detail, _ := doctorCheck(t, d, "mounts"); strings.Contains(detail, "can mount "+vmShare(f)+", "+unseen) {
		t.Errorf("doctor says the engine can mount the unseen path: %q", detail)
	}

	in := shareWorkspace(t, f, "")
	in.write("notes.txt", "notes in the share")
	r = runCLI(t, in.Dir, env, "", "call", "filesystem:read_file", `{"path": "notes.txt"}`)
	if out := callJSON(t, r); r.code != 0 || !strings.Contains(out.Text, "notes in the share") {
		t.Errorf("a workspace under the real share: exit %d %q\n%s", r.code, out.Text, r.stderr)
	}

	// The list is part of the verdict's key: the share alone is proven
	// again, beside the verdict of both.
	r = runCLI(t, in.Dir, []string{"DOCKER_HOST=" + f.Host(), "PML_SANDBOX_SHARED_PATHS=" + vmShare(f), "PML_CACHE_DIR=" + cache}, "", "call", "filesystem:read_file", `{"path": "notes.txt"}`)
	if out := callJSON(t, r); r.code != 0 || !strings.Contains(out.Text, "notes in the share") {
		t.Errorf("the share alone: exit %d %q\n%s", r.code, out.Text, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(cache, "engine-proofs.json"))
	var m map[string]struct{ Unseen []string }
	if err != nil || json.Unmarshal(b, &m) != nil || len(m) != 2 {
		t.Errorf("want two verdicts (one per shared_paths list): %v\n%s", err, b)
	}
	noProofLeft(t, f.Client, cache)
	if left, _ := filepath.Glob(filepath.Join(unseen, "pml-proof-*")); len(left) > 0 {
		t.Errorf("the proof left its markers in the shared path: %v", left)
	}
}
