//go:build linux

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestTheRegistryPagesOneFunctionCapabilityRuns: docs/registry.md's
// example entry, a module whose only function is its default export,
// is the tool named by the entry's action (acme.tools.text.upper →
// text:upper) and runs; before, pml add refused it ("exports no
// function").
func TestTheRegistryPagesOneFunctionCapabilityRuns(t *testing.T) {
	t.Parallel()
	needImage(t, "pml/deno:2.9.6")
	dir := t.TempDir()
	writeEntry(t, dir, "acme.tools.text.upper.ts", "export default (args: { text: string }) => args.text.toUpperCase();\n")
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	if code, _, stderr := runPML(t, ws, "add", "acme.tools.text.upper", "--yes"); code != 0 {
		t.Fatalf("pml add of the page's example: exit %d\n%s", code, stderr)
	}
	// pml call runs an added capability as pml stdio does (before, it
	// looked the name up in the registry as a server and found none).
	if code, stdout, stderr := runPML(t, ws, "call", "text:upper", `{"text": "shout"}`); code != 0 || !strings.Contains(stdout, "SHOUT") {
		t.Errorf("pml call text:upper: exit %d\n%s\n%s", code, stdout, stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := startSession(t, ws)
	upper := wireTool(t, ctx, s, "text", "upper")
	if out, res := s.call(t, upper.Name, map[string]any{"text": "shout"}); res.IsError || !strings.Contains(out, "SHOUT") {
		t.Errorf("%s: %q\n%s", upper.Name, out, s.stderr.String())
	}
}

// TestAnAddedCapabilityIsListedOnceByAClient: where the project's
// .mcp.json runs pml stdio (as pml init writes it), pml add writes no
// `pml run NAME` entry beside it, so a client lists the capability's
// tools once, through pml stdio; before, Claude Code listed them twice.
func TestAnAddedCapabilityIsListedOnceByAClient(t *testing.T) {
	t.Parallel()
	needImage(t, "pml/deno:2.9.6")
	dir := t.TempDir()
	writeEntry(t, dir, "acme.tools.text.upper.ts", "export function upper(a: { text: string }) { return a.text.toUpperCase(); }\n")
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	const mcpJSON = `{"mcpServers": {"pml": {"type": "stdio", "command": "pml", "args": ["stdio"]}}}`
	ws.writeUntrusted(".mcp.json", mcpJSON)
	code, _, stderr := runPML(t, ws, "add", "acme.tools.text.upper", "--yes")
	if code != 0 || !strings.Contains(stderr, `the entry \"pml\"`) || !strings.Contains(stderr, "no `pml run` entry was written") {
		t.Fatalf("pml add beside a pml stdio entry: exit %d\n%s", code, stderr)
	}
	if b, _ := os.ReadFile(ws.path(".mcp.json")); string(b) != mcpJSON {
		t.Errorf(".mcp.json changed: %s", b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := startSession(t, ws)
	upper := wireTool(t, ctx, s, "text", "upper")
	if out, res := s.call(t, upper.Name, map[string]any{"text": "once"}); res.IsError || !strings.Contains(out, "ONCE") {
		t.Errorf("%s: %q\n%s", upper.Name, out, s.stderr.String())
	}
}
