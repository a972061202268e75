//go:build linux

package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pml add is all or nothing (issue 40): an add killed at any moment leaves
// .pml.json and the trust records as they were, never a half-filled
// .pml/deps/NAME, and the next pml add (or pml cleanup) clears what the
// killed install left.

// killedAddPackage is small among the real MCP servers (the SDK and a
// few of its dependencies): an install of some seconds.
const killedAddPackage = "npm:@modelcontextprotocol/server-memory"

// trustRecord is the trust store's record of ws's .pml.json, as bytes.
func trustRecord(t *testing.T, ws *workspace) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(os.Getenv("XDG_STATE_HOME"), "pml", "trust.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Files map[string]json.RawMessage `json:"files"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return string(doc.Files[ws.path(".pml.json")])
}

// partials lists the unfinished installs' directories and locks in
// .pml/deps.
func partials(t *testing.T, ws *workspace) []string {
	t.Helper()
	entries, err := os.ReadDir(ws.path(".pml/deps"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".partial-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestCleanupLeavesARunningInstallAlone: pml cleanup while a pml add
// installs does not touch its partial directory, nor its install once in
// place but not yet in .pml.json; the add succeeds.
func TestCleanupLeavesARunningInstallAlone(t *testing.T) {
	needImage(t, nodeImage)
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:*"]}}`+"\n")
	cmd := execPML(ws, "add", killedAddPackage, "--yes")
	cmd.Dir = ws.Dir
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	var seen []string
	for len(seen) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		for _, p := range partials(t, ws) {
			if !strings.HasSuffix(p, ".lock") {
				seen = append(seen, p)
			}
		}
	}
	if len(seen) == 0 {
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("no partial install appeared:\n%s", stderr.String())
	}
	code, stdout, cerr := runPML(t, ws, "cleanup")
	if code != 0 || strings.Contains(stdout, "interrupted") {
		t.Errorf("pml cleanup during an add: exit %d\n%s\n%s", code, stdout, cerr)
	}
	// Still being filled, or (the install ended meanwhile) in place.
	for _, p := range seen {
		_, err := os.Stat(ws.path(".pml/deps/" + p))
		if _, ferr := os.Stat(ws.path(".pml/deps/memory")); err != nil && ferr != nil {
			t.Errorf("pml cleanup deleted the running install's %s: %v", p, err)
		}
	}
	// Installed and in place, not yet in .pml.json (the server lists
	// its tools): pml cleanup must not take it for a leftover.
	var exited error
	landed := false
wait:
	for {
		select {
		case exited = <-done:
			break wait
		case <-time.After(20 * time.Millisecond):
		}
		if _, err := os.Stat(ws.path(".pml/deps/memory")); err == nil {
			code, stdout, cerr := runPML(t, ws, "cleanup")
			if code != 0 || strings.Contains(stdout, "memory") {
				t.Errorf("pml cleanup while the add lists its tools: exit %d\n%s\n%s", code, stdout, cerr)
			}
			landed = !strings.Contains(readFile(t, ws.path(".pml.json")), `"memory"`)
			exited = <-done
			break
		}
	}
	t.Logf("pml cleanup ran between the install and the write: %v", landed)
	if exited != nil {
		t.Fatalf("the add beside pml cleanup: %v\n%s", exited, stderr.String())
	}
	if cfg := readFile(t, ws.path(".pml.json")); !strings.Contains(cfg, `"memory": {`) {
		t.Errorf(".pml.json after the add:\n%s", cfg)
	}
	if _, err := os.Stat(ws.path(".pml/deps/memory/node_modules")); err != nil {
		t.Errorf("the added server's install is gone: %v", err)
	}
	if deps := readFile(t, ws.path(".pml/deps.json")); !strings.Contains(deps, `"memory"`) {
		t.Errorf(".pml/deps.json lacks memory:\n%s", deps)
	}
}

// TestTwoAddsAtOnce: two pml adds of different servers in one workspace
// at the same time both succeed; .pml.json, .pml/deps.json and the trust
// record have both (each add's partial install is its own, and the
// records are written under a lock).
func TestTwoAddsAtOnce(t *testing.T) {
	needImage(t, nodeImage)
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:*"]}}`+"\n")
	names := []string{"one", "two"}
	type result struct {
		name         string
		code         int
		out, errText string
	}
	results := make(chan result, len(names))
	for _, n := range names {
		go func() {
			cmd := execPML(ws, "add", killedAddPackage, "--name", n, "--yes", "--allow")
			cmd.Dir = ws.Dir
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				code = -1
			}
			results <- result{n, code, stdout.String(), stderr.String() + errString(err)}
		}()
	}
	for range names {
		r := <-results
		if r.code != 0 {
			t.Errorf("pml add --name %s: exit %d\n%s\n%s", r.name, r.code, r.out, r.errText)
		}
	}
	cfg, deps := readFile(t, ws.path(".pml.json")), readFile(t, ws.path(".pml/deps.json"))
	for _, n := range names {
		if !strings.Contains(cfg, `"`+n+`": {`) || !strings.Contains(cfg, `"`+n+`:*"`) {
			t.Errorf(".pml.json lacks %s:\n%s", n, cfg)
		}
		if !strings.Contains(deps, `"`+n+`": {`) {
			t.Errorf(".pml/deps.json lacks %s:\n%s", n, deps)
		}
		if _, err := os.Stat(ws.path(".pml/deps/" + n + "/node_modules")); err != nil {
			t.Errorf(".pml/deps/%s: %v", n, err)
		}
	}
	if left := partials(t, ws); len(left) != 0 {
		t.Errorf("partial installs left: %v", left)
	}
	// Both entries apply without a pml trust (an untrusted server is left
	// out): the trust record has both.
	code, stdout, stderr := runPML(t, ws, "tools", "--format", "json")
	for _, n := range names {
		if code != 0 || !strings.Contains(stdout, `"name": "`+n+`:read_graph"`) {
			t.Errorf("pml tools lacks %s:read_graph: exit %d\n%s\n%s", n, code, stdout, stderr)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
