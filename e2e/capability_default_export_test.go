package e2e

import (
	"context"
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
