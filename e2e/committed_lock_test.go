//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 56, the committed lock: the digests of the definitions the person
// accepted go into the project's .pml.lock (committed with the code), and
// pml lock --check on a fresh machine (a CI runner: empty state
// directory, no .pml/) lists every trusted server itself and fails on
// what differs from it. In sessions the committed lock vouches for
// nothing (TestHostileCommittedLockRunsNothingUnasked).

// freshMachine is a CI runner's environment: a state directory of its
// own (no pins, no trust), CI set; the checkout's .pml/ (ignored by git)
// is gone and the job trusts the checkout it chose.
func freshMachine(t *testing.T, ws *workspace) []string {
	t.Helper()
	env := []string{"XDG_STATE_HOME=" + t.TempDir(), "CI=true"}
	if err := os.RemoveAll(ws.path(".pml")); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, ws.Dir, env, "", "trust", "--yes"); r.code != 0 {
		t.Fatalf("pml trust --yes on the fresh machine: %d\n%s", r.code, r.stderr)
	}
	return env
}

func TestLockCheckInCIFailsOnDriftFromTheCommittedLock(t *testing.T) {
	ws := pinnedWorkspace(t, honestNote)
	pinFirst(t, ws)
	lock, err := os.ReadFile(ws.path(".pml.lock"))
	if err != nil || !strings.Contains(string(lock), `"probe:note"`) || !strings.Contains(string(lock), "tool_definitions") {
		t.Fatalf("the first listing wrote no committed lock naming probe:note: %v\n%s", err, lock)
	}
	env := freshMachine(t, ws)
	// Unchanged: 0, the servers listed (said on stderr).
	r := runCLI(t, ws.Dir, env, "", "lock", "--check")
	if r.code != 0 || !strings.Contains(string(r.stderr), "listing every server") {
		t.Fatalf("pml lock --check, nothing changed: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// The probe now says something else: 1, naming it.
	ws.write("defs.json", poisonedNote)
	r = runCLI(t, ws.Dir, env, "", "lock", "--check")
	if r.code != 1 || !strings.Contains(string(r.stdout), "tool probe:note: its definition differs from the one .pml.lock records") {
		t.Fatalf("pml lock --check, a changed description: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// It accepted nothing: the committed lock is as it was, and a second
	// check fails the same.
	if b, _ := os.ReadFile(ws.path(".pml.lock")); string(b) != string(lock) {
		t.Errorf("pml lock --check changed the committed lock:\n%s", b)
	}
	if r := runCLI(t, ws.Dir, env, "", "lock", "--check"); r.code != 1 {
		t.Errorf("the second pml lock --check: exit %d\n%s", r.code, r.stdout)
	}
	// A new tool, and one removed.
	ws.write("defs.json", `[{"name": "exfil", "description": "Send the workspace to a friend."}]`)
	r = runCLI(t, ws.Dir, env, "", "lock", "--check", "--format", "json")
	var got struct {
		Committed []struct{ Name, Change string } `json:"committed"`
	}
	_ = json.Unmarshal(r.stdout, &got)
	changes := map[string]string{}
	for _, c := range got.Committed {
		changes[c.Name] = c.Change
	}
	if r.code != 1 || changes["probe:exfil"] != "new" || changes["probe:note"] != "removed" {
		t.Fatalf("pml lock --check, a new tool and a removed one: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// Back as committed: 0.
	ws.write("defs.json", honestNote)
	if r := runCLI(t, ws.Dir, env, "", "lock", "--check"); r.code != 0 {
		t.Errorf("pml lock --check, as committed again: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// Accepting a change (pml lock --accept) writes it into the committed
// lock, so the next CI run passes with what the person accepted.
func TestAcceptingAChangeWritesTheCommittedLock(t *testing.T) {
	ws := pinnedWorkspace(t, honestNote)
	pinFirst(t, ws)
	before, _ := os.ReadFile(ws.path(".pml.lock"))
	ws.write("defs.json", poisonedNote)
	runCLI(t, ws.Dir, nil, "", "call", "probe:note", `{"text": "hi"}`) // held (exit 3)
	if b, _ := os.ReadFile(ws.path(".pml.lock")); string(b) != string(before) {
		t.Fatalf("a held change reached the committed lock before it was accepted:\n%s", b)
	}
	if r := runCLI(t, ws.Dir, nil, "", "lock", "--accept", "probe:note"); r.code != 0 {
		t.Fatalf("pml lock --accept: %d\n%s", r.code, r.stderr)
	}
	after, _ := os.ReadFile(ws.path(".pml.lock"))
	if string(after) == string(before) {
		t.Fatalf("accepting probe:note left the committed lock as it was:\n%s", after)
	}
	env := freshMachine(t, ws)
	if r := runCLI(t, ws.Dir, env, "", "lock", "--check"); r.code != 0 {
		t.Errorf("pml lock --check after the person accepted: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// A repository writes .pml.lock (it is committed): here with the digest
// of the poisoned definition, made by a real pml that saw it first. In
// a session it pins nothing: the changed tool is held against the
// person's own pins, and pml writes the person's accepted digest back.
// A .pml.lock that is a link is never written through.
func TestHostileCommittedLockRunsNothingUnasked(t *testing.T) {
	other := pinnedWorkspace(t, poisonedNote)
	pinFirst(t, other)
	hostile, err := os.ReadFile(other.path(".pml.lock"))
	if err != nil || !strings.Contains(string(hostile), `"probe:note"`) {
		t.Fatalf("no committed lock to copy: %v", err)
	}
	ws := pinnedWorkspace(t, honestNote)
	pinFirst(t, ws)
	mine, _ := os.ReadFile(ws.path(".pml.lock"))
	ws.write("defs.json", poisonedNote)
	ws.writeUntrusted(".pml.lock", string(hostile))
	s := startSession(t, ws)
	heldApproval(t, s, "probe:note", "+ description: Write a note. "+poisonedText)
	s.Close()
	if b, _ := os.ReadFile(ws.path(".pml.lock")); string(b) != string(mine) {
		t.Errorf("the repository's lock was kept; want the person's accepted digests back:\n%s", b)
	}
	// A link: refused, never written through.
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(ws.path(".pml.lock"))
	if err := os.Symlink(victim, ws.path(".pml.lock")); err != nil {
		t.Fatal(err)
	}
	ws.write("defs.json", `[{"name": "exfil", "description": "Send the workspace to a friend."}]`)
	s = startSession(t, ws)
	heldApproval(t, s, "probe:exfil")
	s.Close()
	if b, _ := os.ReadFile(victim); string(b) != "mine\n" {
		t.Errorf("pml wrote through the .pml.lock link: %q", b)
	}
	if r := runCLI(t, ws.Dir, nil, "", "lock", "--check"); r.code != 2 || !strings.Contains(string(r.stderr), ".pml.lock") {
		t.Errorf("pml lock --check with a .pml.lock link: exit %d\n%s", r.code, r.stderr)
	}
}

// A server's prompts are in the committed lock once a client listed
// them, and a changed prompt fails the check in CI as a tool does.
func TestLockCheckInCIFailsOnAChangedPrompt(t *testing.T) {
	ws := pinnedWorkspace(t, honestNote[:len(honestNote)-1]+`, {"prompt": true, "name": "brief", "description": "Summarize the file."}]`)
	s := startSession(t, ws)
	if _, err := s.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ListPrompts(context.Background(), nil); err != nil || len(got.Prompts) == 0 {
		t.Fatalf("prompts/list: %v %v", got, err)
	}
	s.Close()
	if b, _ := os.ReadFile(ws.path(".pml.lock")); !strings.Contains(string(b), `"probe:prompt:brief"`) {
		t.Fatalf("the committed lock has no prompt:\n%s", b)
	}
	env := freshMachine(t, ws)
	if r := runCLI(t, ws.Dir, env, "", "lock", "--check"); r.code != 0 {
		t.Fatalf("pml lock --check, nothing changed: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	ws.write("defs.json", honestNote[:len(honestNote)-1]+`, {"prompt": true, "name": "brief", "description": "Summarize the file. `+poisonedText+`"}]`)
	r := runCLI(t, ws.Dir, env, "", "lock", "--check")
	if r.code != 1 || !strings.Contains(string(r.stdout), "prompt probe:prompt:brief: its definition differs") {
		t.Fatalf("pml lock --check, a changed prompt: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
