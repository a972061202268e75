//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The seeds' unpinned form (`npx -y @scope/server`, seed 000 story 14.7
// and its private_mcps example): the first install resolves it to an
// exact version and integrity, says so in one line, and records both in
// .pml/deps.json; a reinstall uses that version; pml doctor's deps check
// fails when what is installed drifts from the record.
func TestAnUnpinnedSeedEntryIsResolvedAtFirstInstallAndRecorded(t *testing.T) {
	needImage(t, nodeImage)
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.everything.server.json", `{"type": "stdio", "description": "MCP test server", "routing": "local",
 "tools": ["everything:echo"], "install": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]}}`)
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	r := runCLI(t, ws.Dir, []string{"PML_WORKSPACE=" + ws.Dir}, "", "call", "everything:echo", `{"message":"unpinned"}`)
	if out := callJSON(t, r); r.code != 0 || !strings.Contains(out.Text, "Echo: unpinned") {
		t.Fatalf("pml call everything:echo: exit %d %q\n%s", r.code, out.Text, r.stderr)
	}
	if !strings.Contains(logText(r.stderr), "resolved to @modelcontextprotocol/server-everything@") || !strings.Contains(logText(r.stderr), "at its first install") {
		t.Errorf("no note of the version chosen:\n%s", r.stderr)
	}
	type record struct{ Version, Package, Integrity string }
	read := func() record {
		var st struct{ Servers map[string]record }
		if err := json.Unmarshal([]byte(readFile(t, ws.path(".pml/deps.json"))), &st); err != nil {
			t.Fatal(err)
		}
		return st.Servers["everything"]
	}
	first := read()
	if first.Version == "" || first.Package != "@modelcontextprotocol/server-everything" || !strings.HasPrefix(first.Integrity, "sha512-") {
		t.Fatalf(".pml/deps.json: %+v", first)
	}
	if r := runCLI(t, ws.Dir, []string{"PML_WORKSPACE=" + ws.Dir}, "", "doctor"); !strings.Contains(string(r.stdout)+logText(r.stderr), "@modelcontextprotocol/server-everything@"+first.Version) {
		t.Errorf("pml doctor's deps check does not show the recorded version:\n%s%s", r.stdout, r.stderr)
	}

	// pml lock --check, the CI gate: as recorded, exit 0; the record
	// edited to another version, exit 1 with one line naming the server
	// and what to run: an edited record is no longer pml's (issue 50), so
	// it is not honoured, and the server would be installed again.
	env := []string{"PML_WORKSPACE=" + ws.Dir}
	if r := runCLI(t, ws.Dir, env, "", "lock", "--check"); r.code != 0 || !strings.Contains(string(r.stdout), "none installed otherwise") {
		t.Errorf("pml lock --check as recorded: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	depsJSON := readFile(t, ws.path(".pml/deps.json"))
	if err := os.WriteFile(ws.path(".pml/deps.json"), []byte(strings.Replace(depsJSON, `"version": "`+first.Version+`"`, `"version": "0.0.2-edited"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, ws.Dir, env, "", "lock", "--check")
	// (The server's first listing wrote .pml.lock, the committed tool
	// definitions; a server whose install is not honoured cannot be
	// listed to compare with it, a second line that says so.)
	lines := strings.Split(strings.TrimSpace(string(r.stdout)), "\n")
	if r.code != 1 || len(lines) < 1 || len(lines) > 2 ||
		!strings.HasPrefix(lines[0], "unvouched: everything: its record in .pml/deps.json is not honoured") ||
		!strings.Contains(lines[0], "pml installs everything again") ||
		len(lines) == 2 && !strings.HasPrefix(lines[1], ".pml.lock: not listed, so not compared: everything:") {
		t.Errorf("pml lock --check with the record edited: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := os.WriteFile(ws.path(".pml/deps.json"), []byte(depsJSON), 0o600); err != nil {
		t.Fatal(err)
	}

	// Drift: the installed tree says another version.
	lock := ws.path(".pml/deps/everything/node_modules/.package-lock.json")
	b, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, []byte(strings.Replace(string(b), `"version": "`+first.Version+`"`, `"version": "0.0.1-drift"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, ws.Dir, []string{"PML_WORKSPACE=" + ws.Dir}, "", "doctor"); r.code == 0 || !strings.Contains(string(r.stdout)+logText(r.stderr), "0.0.1-drift") {
		t.Errorf("pml doctor passed with drift: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Reinstalled from scratch: the recorded version, with its integrity.
	if err := os.RemoveAll(ws.path(".pml/deps/everything")); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, ws.Dir, []string{"PML_WORKSPACE=" + ws.Dir}, "", "call", "everything:echo", `{"message":"again"}`)
	if out := callJSON(t, r); r.code != 0 || !strings.Contains(out.Text, "Echo: again") {
		t.Fatalf("after removing the install: exit %d %q\n%s", r.code, out.Text, r.stderr)
	}
	if again := read(); again.Version != first.Version || again.Integrity != first.Integrity {
		t.Errorf("reinstalled %+v; want the recorded %+v", again, first)
	}
	if strings.Contains(logText(r.stderr), "at its first install") {
		t.Errorf("the reinstall says it resolved again:\n%s", r.stderr)
	}
}
