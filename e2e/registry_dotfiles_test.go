//go:build linux

package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// TestARegistryServersDotfilesAreShownInItsApproval: issue 51 item 11.
// A registry entry that warns it writes dotfiles (the seeds' snake_case
// "warnings": {"creates_dotfiles": [...]}) has it said in the approval
// the person answers before the server first runs, with where it could
// write them (pml grants no place: /tmp only, lost when the container
// stops); the approval's context lists them.
func TestARegistryServersDotfilesAreShownInItsApproval(t *testing.T) {
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.dotprobe.server.json", fmt.Sprintf(`{"type": "stdio", "description": "probe that keeps state", "tools": ["dotprobe:echo", "dotprobe:env"],
 "image": %q, "env": {"GREETING": "hi"}, "workspace": "none", "warnings": {"creates_dotfiles": [".dotprobe"]}}`, probeImage(t)))
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	s := startSession(t, ws)
	_, res := s.call(t, "dotprobe:env", nil)
	var a struct {
		approval
		Context map[string]any `json:"context"`
	}
	structured(t, res, &a)
	if res.IsError || !a.ApprovalRequired {
		t.Fatalf("the registry server's first call: want an approval, got %+v\n%s", a, s.stderr.String())
	}
	if !strings.Contains(a.Description, "writes dotfiles (warnings.createsDotfiles)") || !strings.Contains(a.Description, ".dotprobe") || !strings.Contains(a.Description, "pml grants no place for them") {
		t.Errorf("the approval (%s) does not say the server writes the dotfile .dotprobe: %q", a.ApprovalType, a.Description)
	}
	if got := fmt.Sprint(a.Context["creates_dotfiles"]); got != "[.dotprobe]" {
		t.Errorf("approval context creates_dotfiles = %s", got)
	}
	// Approved, it runs as any registry server: the warning grants nothing
	// and takes nothing away.
	if out, res := s.call(t, "dotprobe:env", map[string]any{"continue_workflow": cont(a.WorkflowID, true, false)}); res.IsError || !strings.Contains(out, "GREETING=hi") {
		t.Errorf("after the approval: %q", out)
	}
}
