//go:build linux

package e2e

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCapabilityNamedInPmlJSONIsAToolOfPmlStdio: a clone has .pml.json
// (committed) and no .pml/. A capability its trusted capabilities key
// names is fetched by pml stdio once the session started, pinned in
// .pml/mcp.lock and listed: a real MCP client hears tools/list_changed,
// sees it and calls it. An untrusted file's names are not fetched;
// offline, one not fetched yet is one warning naming pml add. pml add
// writes the name into capabilities, pml remove takes it out.
func TestCapabilityNamedInPmlJSONIsAToolOfPmlStdio(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	dir := t.TempDir()
	writeEntry(t, dir, "acme.tools.mathx.double.ts", noteCapability)
	writeEntry(t, dir, "pml.mcp.notes.server.ts", "export function count() { return 3; }\n")
	reg := startRegistry(t, dir)
	named := `, "capabilities": ["acme.tools.mathx.double"]`

	// Untrusted (a clone nobody trusted yet): nothing is fetched.
	un := newWorkspace(t, "")
	un.writeUntrusted(".pml.json", registryConfig(named, reg.URL))
	us := startSession(t, un)
	time.Sleep(3 * time.Second)
	if _, err := os.Stat(un.path(".pml/mcp.lock")); !os.IsNotExist(err) {
		t.Errorf("an untrusted .pml.json's capability was fetched (%v)\n%s", err, us.stderr.String())
	}
	_ = us.Close()

	ws := newWorkspace(t, registryConfig(named, reg.URL)) // trusted, as pml trust --yes does
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var changed atomic.Int32
	began := time.Now()
	s := startSessionWith(t, pmlBin, ws, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) },
	})
	if _, err := s.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("initialize and the first tools/list took %v", time.Since(began).Round(time.Millisecond))
	waitFor(t, "tools/list_changed once the named capability is fetched", 30*time.Second, func() bool { return changed.Load() > 0 })
	t.Logf("tools/list_changed %v after the session started", time.Since(began).Round(time.Millisecond))
	double := wireTool(t, ctx, s, "mathx", "double")
	if out, res := s.call(t, double.Name, map[string]any{"n": 21}); res.IsError || out != "42" {
		t.Fatalf("%s: %q\n%s", double.Name, out, s.stderr.String())
	}
	lock, err := os.ReadFile(ws.path(".pml/mcp.lock"))
	if err != nil || !strings.Contains(string(lock), "acme.tools.mathx.double.") {
		t.Errorf("not pinned in .pml/mcp.lock: %v\n%s", err, lock)
	}
	if _, err := os.Stat(ws.path(".pml/capabilities.json")); !os.IsNotExist(err) {
		t.Errorf(".pml/capabilities.json was written: %v", err)
	}
	_ = s.Close()

	// pml add writes the name into .pml.json; pml remove takes it out.
	if code, _, stderr := runPML(t, ws, "add", "notes@latest"); code != 0 || !strings.Contains(stderr, "wrote notes@latest to the capabilities of") {
		t.Fatalf("pml add notes@latest: %d\n%s", code, stderr)
	}
	if b, _ := os.ReadFile(ws.path(".pml.json")); !strings.Contains(string(b), `"acme.tools.mathx.double"`) || !strings.Contains(string(b), `"notes@latest"`) {
		t.Errorf("pml add did not write capabilities:\n%s", b)
	}
	if code, _, stderr := runPML(t, ws, "remove", "notes"); code != 0 {
		t.Fatalf("pml remove notes: %d\n%s", code, stderr)
	}
	if b, _ := os.ReadFile(ws.path(".pml.json")); strings.Contains(string(b), "notes") || !strings.Contains(string(b), `"acme.tools.mathx.double"`) {
		t.Errorf("pml remove notes left:\n%s", b)
	}

	// Offline, never fetched: one warning naming pml add, and the session
	// goes on.
	reg.stop(t)
	off := newWorkspace(t, registryConfig(`, "capabilities": ["ghost"]`, reg.URL))
	os2 := startSession(t, off)
	waitFor(t, "the warning about ghost", 30*time.Second, func() bool { return strings.Contains(os2.stderr.String(), "run `pml add ghost`") })
	if n := strings.Count(os2.stderr.String(), "run `pml add ghost`"); n != 1 {
		t.Errorf("%d warnings about ghost, want 1:\n%s", n, os2.stderr.String())
	}
	if _, err := os2.ListTools(ctx, nil); err != nil {
		t.Errorf("the session did not go on: %v", err)
	}
	_ = os2.Close()
}
