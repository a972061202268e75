//go:build linux

package e2e

import (
	"strings"
	"testing"
)

// TestHostileRegistryCapabilityToolNamesOutsideMCPsRule: a registry's deno
// module exports functions whose JavaScript names are not MCP tool names
// ($ is a JavaScript name character, not an MCP one). pml add offers only
// the function whose name is one, a pml stdio session lists only it, and
// says which it left out.
func TestHostileRegistryCapabilityToolNamesOutsideMCPsRule(t *testing.T) {
	t.Parallel()
	needImage(t, "pml/deno:2.9.6")
	dir := t.TempDir()
	writeEntry(t, dir, "acme.tools.names.good.ts", `export function good_one(args: { n: number }) { return args.n; }
export function $evil(args: { n: number }) { return args.n; }
export const ev$il = (args: { n: number }) => args.n;
`)
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	code, stdout, stderr := runPML(t, ws, "add", "acme.tools.names.good")
	if code != 0 || !strings.Contains(stderr, "names:good_one") {
		t.Fatalf("pml add: exit %d, want names:good_one offered\n%s%s", code, stdout, stderr)
	}
	if strings.Contains(stdout+stderr, "names:$evil") || strings.Contains(stdout+stderr, "names:ev$il") {
		t.Errorf("pml add offers a function whose name is not an MCP tool name:\n%s%s", stdout, stderr)
	}
	s := startSession(t, ws)
	if !listsTool(t, s.ClientSession, "names:good_one") {
		t.Error("the capability's valid function is not listed")
	}
	for _, bad := range []string{"names:$evil", "names:ev$il"} {
		if listsTool(t, s.ClientSession, bad) {
			t.Errorf("%s is listed: a registry chose a tool name outside MCP's rule", bad)
		}
	}
	if !s.logs("a function of the capability is not listed", "$evil") {
		t.Errorf("pml's stderr does not say which functions it left out:\n%s", tail(s.stderr.String()))
	}
}
