package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/config"
)

// pml call meets a capability's one up-front approval: what it says
// names the declared tools that ask, and the fix allows each of them
// (allowing the capability's own tool would change nothing).
func TestPmlCallSaysToAllowTheDeclaredToolsThatAsk(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, ".pml.json"), []byte(`{"permissions": {"allow": ["upf:*"], "ask": ["filesystem:write_file", "shell:*"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(ws, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a := workflow.Approval{ApprovalType: workflow.ApprovalToolPermission, Tool: "upf:main",
		Context: map[string]any{"pattern": "upf:*", "asked_tools": []string{"filesystem:write_file", "shell:exec"}}}
	what, fix := approvalHelp(cfg, a)
	if !strings.Contains(what, "declares (tools_used) that its code calls filesystem:write_file, shell:exec") || !strings.Contains(what, "nothing ran") {
		t.Errorf("what: %s", what)
	}
	if !strings.Contains(fix, `.permissions.ask -= ["filesystem:write_file"]`) || !strings.Contains(fix, `"shell:exec"`) || !strings.Contains(fix, `it matched "shell:*"`) || strings.Contains(fix, `"upf:main"`) {
		t.Errorf("fix: %s", fix)
	}
}
