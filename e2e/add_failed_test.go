//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A failed pml add changes nothing, and what a killed capability add left
// mid-install is cleared by the next add, remove, trust or lock (issue 51
// items 4 and 5).

// addFailedFiles are the files a pml add of smartSearch may write.
var addFailedFiles = []string{".pml/mcp.lock", ".pml/registry-cache/pml.mcp.smartsearch.server.json",
	".pml.json", ".pml/capabilities.json", ".mcp.json", ".pml/deps.json"}

// fileStates is each of files as bytes ("<absent>" when missing).
func fileStates(t *testing.T, ws *workspace, files []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(ws.path(f))
		switch {
		case os.IsNotExist(err):
			out[f] = "<absent>"
		case err != nil:
			t.Fatal(err)
		default:
			out[f] = string(b)
		}
	}
	return out
}

func sameFiles(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for f, b := range before {
		if after[f] != b {
			t.Errorf("%s changed %s:\n%s\nwas:\n%s", what, f, after[f], b)
		}
	}
}

// TestAFailedAddKeepsTheVersionThatWorked: smartSearch 1.2.0 is added and
// works; pml add smartSearch@~1.1.0 matches 1.1.0, whose code exports no
// function, so the add fails. The lockfile, the cached copy, .pml.json,
// .pml/capabilities.json and .mcp.json are byte-identical afterwards, and
// a pml stdio session (the registry down) still lists and runs 1.2.0.
// Before, the failed add moved the pin to 1.1.0 and replaced the cached
// copy: the session listed nothing of smartSearch.
func TestAFailedAddKeepsTheVersionThatWorked(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.smartsearch.server@1.1.0.ts", "// 1.1.0 exports nothing\nconst search = 1;\n")
	writeEntry(t, dir, "pml.mcp.smartsearch.server@1.2.0.ts", "export function search(args: { q: string }) { return 'v1.2.0 ' + args.q; }\n")
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	if code, _, stderr := runPML(t, ws, "add", "smartSearch@1.2.0", "--yes"); code != 0 {
		t.Fatalf("pml add smartSearch@1.2.0: exit %d\n%s", code, stderr)
	}
	before := fileStates(t, ws, addFailedFiles)
	trustBefore := trustRecord(t, ws)
	code, _, stderr := runPML(t, ws, "add", "smartSearch@~1.1.0", "--yes")
	if code == 0 || !strings.Contains(stderr, "exports no function") {
		t.Fatalf("pml add smartSearch@~1.1.0 (1.1.0 exports no function): exit %d, want a failure\n%s", code, stderr)
	}
	sameFiles(t, "the failed add", before, fileStates(t, ws, addFailedFiles))
	if tr := trustRecord(t, ws); tr != trustBefore {
		t.Errorf("the failed add changed the trust record:\n%s\nwas:\n%s", tr, trustBefore)
	}
	// Offline: what the session serves is what the workspace pinned and
	// cached, not what the registry says now.
	reg.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s := startSession(t, ws)
	var tool string
	waitFor(t, "smartsearch:search in tools/list", 30*time.Second, func() bool {
		tools, err := s.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range tools.Tools {
			if strings.HasPrefix(tl.Name, "smartsearch") && strings.HasSuffix(tl.Name, "search") {
				tool = tl.Name
				return true
			}
		}
		return false
	})
	if out, res := s.call(t, tool, map[string]any{"q": "pml"}); res.IsError || out != `"v1.2.0 pml"` {
		t.Errorf("%s after the failed add: %q\n%s", tool, out, s.stderr.String())
	}
}

// TestAFailedNPMAddLeavesTheLockfile: smartSearch is added, then its
// namespace denied in .pml.json; a pml add npm: whose install fails
// (its tarball is no tarball) leaves .pml/mcp.lock, the cache, .pml.json
// and the rest byte-identical. Before, the add's broker dropped the
// denied entry from the lockfile on its way and the failure left that.
func TestAFailedNPMAddLeavesTheLockfile(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	needImage(t, nodeImage)
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.smartsearch.server@1.2.0.ts", "export function search(args: { q: string }) { return 'v1.2.0 ' + args.q; }\n")
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	if code, _, stderr := runPML(t, ws, "add", "smartSearch@1.2.0", "--yes"); code != 0 {
		t.Fatalf("pml add smartSearch@1.2.0: exit %d\n%s", code, stderr)
	}
	// Denied from now on: a broker that starts here drops its lockfile
	// entry, as a session does.
	cfg := strings.Replace(readFile(t, ws.path(".pml.json")), `"allow": [`, `"deny": ["smartsearch:*"], "allow": [`, 1)
	ws.write(".pml.json", cfg)
	if !strings.Contains(readFile(t, ws.path(".pml/mcp.lock")), "pml.mcp.smartsearch.server") {
		t.Fatal("smartSearch is not in .pml/mcp.lock: this test could not see a change")
	}
	before := fileStates(t, ws, addFailedFiles)
	trustBefore := trustRecord(t, ws)
	tarball := []byte("not a tarball")
	npm := fakeNPM(t, "@pml-test/server-fake", sri512(tarball), tarball)
	r := runCLI(t, ws.Dir, []string{"PML_WORKSPACE=" + ws.Dir, "npm_config_registry=" + npm.URL}, "", "add", "npm:@pml-test/server-fake", "--yes")
	if r.code == 0 || !strings.Contains(logText(r.stderr), "nothing was written") {
		t.Fatalf("pml add npm:@pml-test/server-fake (no tarball): exit %d, want a failure\n%s", r.code, r.stderr)
	}
	sameFiles(t, "the failed npm add", before, fileStates(t, ws, addFailedFiles))
	if tr := trustRecord(t, ws); tr != trustBefore {
		t.Errorf("the failed npm add changed the trust record:\n%s\nwas:\n%s", tr, trustBefore)
	}
}

// memoryCapability is a stdio registry entry whose install is a real npm
// install (some seconds): a kill mid-install leaves its partial directory
// and its install container.
const memoryCapability = `{"type": "stdio", "description": "memory from a registry", "routing": "local",
 "tools": ["memory:read_graph"], "install": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}`

// killCapabilityAdd starts pml add memory --yes and kills it (SIGKILL)
// once its install is under way: a partial directory in .pml/deps and an
// install container of the workspace.
func killCapabilityAdd(t *testing.T, ws *workspace) {
	t.Helper()
	cmd := execPML(ws, "add", "memory", "--yes")
	cmd.Dir = ws.Dir
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	had := map[string]bool{}
	for _, p := range partialDirs(t, ws) {
		had[p] = true
	}
	started := func() bool {
		for _, p := range partialDirs(t, ws) {
			if !had[p] {
				return len(containersOf(t, ws.Dir)) > 0
			}
		}
		return false
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-done:
			t.Fatalf("pml add memory ended before its install could be killed: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if started() {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("no install of pml add memory was seen under way:\n%s", stderr.String())
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// partialDirs are the unfinished installs' directories in .pml/deps (not
// their locks).
func partialDirs(t *testing.T, ws *workspace) []string {
	var out []string
	for _, p := range partials(t, ws) {
		if !strings.HasSuffix(p, ".lock") {
			out = append(out, p)
		}
	}
	return out
}

// TestKilledCapabilityAddsAreClearedByTheNextCommand kills a capability
// pml add (a stdio entry with an npm install) mid-install three times,
// then runs pml lock, pml trust, pml remove and pml add (of another
// capability) in turn: each clears the partial directories and the
// install containers the killed adds left, as pml add npm: and pml
// cleanup do. Before, only pml call and pml cleanup did: they piled up.
func TestKilledCapabilityAddsAreClearedByTheNextCommand(t *testing.T) {
	needImage(t, nodeImage)
	needImage(t, "pml/deno:2.9.6")
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.memory.server.json", memoryCapability)
	writeEntry(t, dir, "pml.mcp.notes.server.ts", "export function count() { return 1; }\n")
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	const kills = 3
	for _, c := range [][]string{{"lock"}, {"trust", "--yes"}, {"remove", "memory"}, {"add", "notes", "--yes"}} {
		began := time.Now()
		for i := 0; i < kills; i++ {
			killCapabilityAdd(t, ws)
		}
		left, running := partialDirs(t, ws), len(containersOf(t, ws.Dir))
		if len(left) == 0 {
			t.Fatalf("%d killed adds left no partial directory: nothing to clear", kills)
		}
		t.Logf("%d kills in %s left %d partial directories, %d containers", kills, time.Since(began).Round(time.Millisecond), len(left), running)
		code, _, stderr := runPML(t, ws, c...)
		// pml remove memory: nothing of that name is added (exit 2), the
		// leftovers go all the same.
		if code != 0 && !(c[0] == "remove" && code == 2) {
			t.Errorf("pml %s: exit %d\n%s", strings.Join(c, " "), code, stderr)
		}
		if now := partials(t, ws); len(now) != 0 {
			t.Errorf("pml %s left the killed adds' %v\n%s", strings.Join(c, " "), now, stderr)
		}
		if n := len(containersOf(t, ws.Dir)); n != 0 {
			t.Errorf("pml %s left %d containers of the killed adds", strings.Join(c, " "), n)
		}
		if !strings.Contains(stderr, "removed an interrupted install's leftovers: .pml/deps/.partial-memory-") {
			t.Errorf("pml %s did not say it cleared the leftovers:\n%s", strings.Join(c, " "), stderr)
		}
		if t.Failed() {
			// Each command is checked on its own leftovers.
			runPML(t, ws, "cleanup")
		}
	}
}

// TestAnAddThatFailsAtItsLastWriteChangesNothing: pml add of a capability
// gets as far as .mcp.json, which cannot be read, and fails. What it had
// written on its way (the lockfile, the cache, .pml/capabilities.json,
// .pml.json's capabilities) is put back: before, all of it stayed and
// the message said "the capability is recorded".
func TestAnAddThatFailsAtItsLastWriteChangesNothing(t *testing.T) {
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.smartsearch.server@1.2.0.ts", "export function search(args: { q: string }) { return 'v1.2.0 ' + args.q; }\n")
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	ws.writeUntrusted(".mcp.json", "{ not json")
	before := fileStates(t, ws, addFailedFiles)
	trustBefore := trustContent(t, ws)
	code, _, stderr := runPML(t, ws, "add", "smartSearch@1.2.0", "--yes")
	if code == 0 {
		t.Fatalf("pml add with an unreadable .mcp.json: exit 0, want a failure\n%s", stderr)
	}
	sameFiles(t, "the add that failed at .mcp.json", before, fileStates(t, ws, addFailedFiles))
	if !strings.Contains(stderr, "nothing was added") {
		t.Errorf("pml add with an unreadable .mcp.json: exit %d, want it to say nothing was added\n%s", code, stderr)
	}
	if tr := trustContent(t, ws); tr != trustBefore {
		t.Errorf("the failed add changed the trust record:\n%s\nwas:\n%s", tr, trustBefore)
	}
}

// trustContent is the trust record of ws's .pml.json without its time:
// the bytes it trusts and the grants.
func trustContent(t *testing.T, ws *workspace) string {
	t.Helper()
	var rec map[string]json.RawMessage
	if err := json.Unmarshal([]byte(trustRecord(t, ws)), &rec); err != nil {
		t.Fatal(err)
	}
	delete(rec, "at")
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAFailedCapabilityAddRemovesWhatItInstalled: pml add of a stdio
// capability installs its server (a real npm install), then fails at
// .mcp.json, which cannot be read. The installed tree and its record go
// with the rest: before, .pml/deps/memory and its record stayed, with
// the capability recorded in .pml/capabilities.json.
func TestAFailedCapabilityAddRemovesWhatItInstalled(t *testing.T) {
	needImage(t, nodeImage)
	dir := t.TempDir()
	// It takes a host variable: a grant the add records.
	writeEntry(t, dir, "pml.mcp.memory.server.json", strings.Replace(memoryCapability, `"routing": "local",`, `"routing": "local", "env_required": ["MEMORY_NOTE_TOKEN"],`, 1))
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	ws.writeUntrusted(".mcp.json", "{ not json")
	files := []string{".pml/mcp.lock", ".pml/registry-cache/pml.mcp.memory.server.json", ".pml.json", ".pml/capabilities.json", ".mcp.json"}
	before := fileStates(t, ws, files)
	code, _, stderr := runPML(t, ws, "add", "memory", "--yes")
	if code == 0 {
		t.Fatalf("pml add memory with an unreadable .mcp.json: exit 0, want a failure\n%s", stderr)
	}
	sameFiles(t, "the failed add", before, fileStates(t, ws, files))
	if !strings.Contains(stderr, "removed what the failed add installed: .pml/deps/memory") {
		t.Errorf("the failed add did not say it removed its install:\n%s", stderr)
	}
	if _, err := os.Stat(ws.path(".pml/deps/memory")); !os.IsNotExist(err) {
		t.Errorf("the failed add left .pml/deps/memory (%v)", err)
	}
	if d := fileStates(t, ws, []string{".pml/deps.json"})[".pml/deps.json"]; strings.Contains(d, `"memory"`) {
		t.Errorf("the failed add left its record in .pml/deps.json:\n%s", d)
	}
	if !strings.Contains(stderr, "Grant it?") {
		t.Fatalf("the add asked no grant (its image): the grant's undo is not seen\n%s", stderr)
	}
	if g := entryGrants(t)[ws.Dir]; len(g) != 0 {
		t.Errorf("the failed add left its grant recorded: %s", g)
	}
}

// entryGrants are the registry grants recorded in the state directory,
// by workspace.
func entryGrants(t *testing.T) map[string]map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(os.Getenv("XDG_STATE_HOME"), "pml", "entry-grants.json"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Workspaces map[string]map[string]json.RawMessage `json:"workspaces"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Workspaces
}
