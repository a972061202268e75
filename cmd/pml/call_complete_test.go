package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
)

// pml call every<TAB> completes the server's name (everything:), not only
// tool names: a server never started here has no tool names yet.
func TestCallCompletesServerNames(t *testing.T) {
	k := tl.KnownTools{Names: []string{"filesystem:read_file", "shell:exec", call.ContinueTool, "pml:execute", "files:read_text_file"}, Unlisted: []string{"everything"}}
	got, dir := completeTool(k, []string{"memory"}, "every")
	if strings.Join(got, " ") != "everything:" || dir&cobra.ShellCompDirectiveNoSpace == 0 {
		t.Errorf("every: %v (directive %d): want everything: with no space after", got, dir)
	}
	got, _ = completeTool(k, nil, "fil")
	if strings.Join(got, " ") != "files: filesystem:" {
		t.Errorf("fil: %v", got)
	}
	got, _ = completeTool(k, []string{"memory"}, "")
	if strings.Join(got, " ") != "everything: files: filesystem: memory: pml: shell:" {
		t.Errorf("nothing typed: %v", got)
	}
	// After the ':' the tools follow, with a space after.
	got, dir = completeTool(k, nil, "files:")
	if strings.Join(got, " ") != "files:read_text_file" || dir&cobra.ShellCompDirectiveNoSpace != 0 {
		t.Errorf("files: %v (directive %d)", got, dir)
	}
	if got, _ = completeTool(k, nil, "pml:"); strings.Join(got, " ") != "pml:execute" {
		t.Errorf("pml:continue_workflow is not a tool to call: %v", got)
	}
}

// The same through the shell's completion request, in a project whose
// server was never started (no tools cached).
func TestCallCompletionInAProject(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".pml.json"), []byte(`{"mcps": {"everything": {"image": "pml/node:18", "command": "node"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PML_WORKSPACE", dir)
	t.Setenv("HOME", t.TempDir())
	out, code, err := execRoot(t, "__complete", "call", "every")
	if code != 0 || !strings.Contains(out, "everything:\n") {
		t.Fatalf("exit %d (%v):\n%s", code, err, out)
	}
	out, _, _ = execRoot(t, "__complete", "call", "filesystem:read_")
	if !strings.Contains(out, "filesystem:read_file\n") {
		t.Errorf("tool names:\n%s", out)
	}
}
