package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/registry"
)

// withDeps makes cap (withCapability) require the servers names (its
// mcp_deps).
func withDeps(f *fixture, names ...string) {
	e := f.b.registry.DenoOf("cap:")
	for _, n := range names {
		e.Meta.McpDeps = append(e.Meta.McpDeps, registry.McpDep{Name: n})
	}
}

// A capability requiring a server whose every tool is denied ("memory:*")
// is refused before its run starts, naming the server and the pattern,
// with the one audit entry of the call, though its tools_used names no
// tool of that server.
func TestARequiredServerDeniedWhollyRefusesTheRunBeforeItStarts(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["cap:*", "filesystem:*"], "deny": ["memory:*"]}}`)
	withCapability(t, f, `filesystem:write_file {"path": "w.txt", "content": "x"}`, "filesystem:write_file")
	withDeps(f, "memory")
	res := f.call(t, "cap:main", map[string]any{})
	if !res.IsError || !strings.Contains(res.Text, "requires the MCP server memory (mcp_deps)") || !strings.Contains(res.Text, `deny pattern "memory:*"`) || !strings.Contains(res.Text, "nothing ran") {
		t.Fatalf("refusal: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "w.txt")); err == nil {
		t.Error("the run started: its first call wrote w.txt")
	}
	es := entriesOf(t, f)
	if len(es) != 1 || es[0].Tool != "cap:main" || es[0].Decision != audit.Denied || es[0].Pattern != "memory:*" || !strings.Contains(es[0].Reason, "memory") {
		t.Fatalf("audit: %+v", es)
	}
}

// A deny of some of a required server's tools refuses nothing up front:
// the capability may use only the others, and each call is decided on
// its own.
func TestANarrowerDenyOfARequiredServerLetsTheRunStart(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["cap:*", "filesystem:*"], "deny": ["memory:delete_entities"]}}`)
	withCapability(t, f, `filesystem:write_file {"path": "w.txt", "content": "x"}`)
	withDeps(f, "memory")
	if res := f.call(t, "cap:main", map[string]any{}); res.IsError {
		t.Fatalf("run: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "w.txt")); string(b) != "x" {
		t.Errorf("w.txt: %q", b)
	}
}

// A required server denied whole while the up-front approval waited (a
// reload) refuses the approved run before it starts.
func TestARequiredServerDeniedWhileTheApprovalWaitedRefusesTheRun(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["cap:*"], "ask": ["filesystem:write_file", "shell:exec"]}}`)
	withCapability(t, f, capCode, "filesystem:write_file", "shell:exec")
	withDeps(f, "memory")
	a := approvalOf(t, f.call(t, "cap:main", map[string]any{}))
	p := f.b.perms.Current()
	p.Deny = []string{"memory__*"}
	if _, ok := f.b.perms.Replace(p, "a reload", f.b.perms.Generation()); !ok {
		t.Fatal("permissions not replaced")
	}
	res := f.call(t, "cap:main", map[string]any{"continue_workflow": map[string]any{"workflow_id": a.WorkflowID, "approved": true}})
	if !res.IsError || !strings.Contains(res.Text, "requires the MCP server memory (mcp_deps)") || !strings.Contains(res.Text, `deny pattern "memory__*"`) {
		t.Fatalf("after continue: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "w.txt")); err == nil {
		t.Error("the run started")
	}
}
