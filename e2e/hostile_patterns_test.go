//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// nameForms are the names a person may copy shell:exec from: pml's own,
// the MCP wire name clients list, the name Claude Code and codex show
// (their server prefix), and pml's own in capitals.
var nameForms = []string{"shell:exec", "shell__exec", "mcp__pml__shell__exec", "SHELL:EXEC"}

// TestHostileDenyAndAskInEveryNameForm: a deny or an ask pattern written
// in any form pml shows for a tool, in any case, holds against a wildcard
// allow. Before, only pml's own lower-case form matched: the others
// matched nothing and the call ran, which for a deny fails open without
// a word.
func TestHostileDenyAndAskInEveryNameForm(t *testing.T) {
	t.Parallel()
	for _, form := range nameForms {
		quoted, _ := json.Marshal(form)
		t.Run("deny "+form, func(t *testing.T) {
			t.Parallel()
			ws := newWorkspace(t, `{"permissions": {"allow": ["*"], "deny": [`+string(quoted)+`]}}`)
			s := startSession(t, ws)
			// The client calls the name it lists; a denied tool is not
			// listed, and still answers "denied".
			out, res := s.call(t, "shell__exec", map[string]any{"command": "touch ran"})
			if !res.IsError || !strings.Contains(out, "deny pattern "+string(quoted)) {
				t.Errorf("deny %s under allow *: shell:exec should be denied naming the pattern; got isError=%v %q", form, res.IsError, out)
			}
			if listsTool(t, s.ClientSession, "shell:exec") {
				t.Errorf("deny %s: shell__exec is still listed", form)
			}
			assertNotRan(t, ws)
		})
		t.Run("ask "+form, func(t *testing.T) {
			t.Parallel()
			ws := newWorkspace(t, `{"permissions": {"allow": ["*"], "ask": [`+string(quoted)+`]}}`)
			s := startSession(t, ws)
			out, res := s.call(t, "shell__exec", map[string]any{"command": "touch ran"})
			var a approval
			if res.StructuredContent != nil {
				structured(t, res, &a)
			}
			if res.IsError || !a.ApprovalRequired || a.Tool != "shell:exec" {
				t.Errorf("ask %s under allow *: shell:exec should need approval; got isError=%v %+v %q", form, res.IsError, a, out)
			}
			assertNotRan(t, ws)
		})
	}
}

// assertNotRan fails when the command "touch ran" left its file: the
// call ran although it was denied or awaits approval.
func assertNotRan(t *testing.T, ws *workspace) {
	t.Helper()
	if _, err := os.Stat(ws.path("ran")); err == nil {
		t.Error("the command ran")
	}
}
