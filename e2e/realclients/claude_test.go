//go:build realclients

package realclients

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Claude Code 2.1.332, pointed at the scripted model by
// ANTHROPIC_BASE_URL.
const claudeDir = "claude-code-2.1.332"

func claudeMachine(t *testing.T) (*machine, string) {
	bin := clientBin(t, claudeDir, "claude")
	m := newMachine(t, bin)
	m.extra = []string{"ANTHROPIC_BASE_URL=" + m.model.URL(), "ANTHROPIC_API_KEY=sk-ant-scripted-model-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "IS_SANDBOX=1"}
	return m, bin
}

// approveProjectServer is what a person answers the first time Claude
// Code opens the project, as Claude Code records it: the folder trusted
// (~/.claude.json) and the project's server pml approved
// (.claude/settings.local.json).
func approveProjectServer(t *testing.T, m *machine, dir string) {
	t.Helper()
	state := filepath.Join(m.home, ".claude.json")
	doc := map[string]any{}
	if b, err := os.ReadFile(state); err == nil {
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
	}
	projects, _ := doc["projects"].(map[string]any)
	if projects == nil {
		projects = map[string]any{}
	}
	projects[dir] = map[string]any{"hasTrustDialogAccepted": true}
	doc["projects"] = projects
	b, _ := json.Marshal(doc)
	if err := os.WriteFile(state, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".claude", "settings.local.json"), []byte(`{"enabledMcpjsonServers": ["pml"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
}

func claudeConnected(t *testing.T, m *machine, dir, bin string) {
	t.Helper()
	r := m.run(dir, 2*time.Minute, bin, "mcp", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "pml") || !strings.Contains(r.stdout, "Connected") {
		t.Fatalf("claude mcp list: exit %d\n%s\n%s", r.code, r.stdout, tail(r.stderr, 3000))
	}
	m.showsAsInitSaid("claude-code", r.stdout)
}

func claudeRead(m *machine, dir, bin string) result {
	return m.run(dir, 4*time.Minute, bin, "-p", "Read hello.txt with pml and quote it.", "--allowedTools", "mcp__pml", "--model", "claude-sonnet-4-5")
}

// pml init (Claude Code's .mcp.json, no path in it), approved: claude
// lists pml connected, offers pml's tools to the model and reads the
// project's file through pml; the project copied elsewhere (a clone)
// serves the copy's file.
func TestClaudeCodeProjectFile(t *testing.T) {
	m, bin := claudeMachine(t)
	dir, marker := m.project("first")
	m.pmlInit(dir)
	noMachinePath(t, filepath.Join(dir, ".mcp.json"), dir)
	approveProjectServer(t, m, dir)
	claudeConnected(t, m, dir, bin)
	m.readsThroughPML("claude", claudeRead(m, dir, bin), marker)
	clone, cloneMarker := m.copyProject(dir, "clone")
	approveProjectServer(t, m, clone)
	m.readsThroughPML("claude in the copy", claudeRead(m, clone, bin), cloneMarker)
}

// One user-level entry (pml init --client claude-code --scope user, run
// once in one project) serves every project: claude opened in each
// reads that project's own file.
func TestClaudeCodeUserEntryServesEveryProject(t *testing.T) {
	m, bin := claudeMachine(t)
	one, marker1 := m.project("one")
	two, marker2 := m.project("two")
	m.pmlInit(one, "--client", "claude-code", "--scope", "user")
	noMachinePath(t, filepath.Join(m.home, ".claude.json"), one)
	if _, err := os.Stat(filepath.Join(two, ".mcp.json")); err == nil {
		t.Fatal("a project file was written for --scope user")
	}
	claudeConnected(t, m, two, bin)
	m.readsThroughPML("claude in project one", claudeRead(m, one, bin), marker1)
	m.readsThroughPML("claude in project two", claudeRead(m, two, bin), marker2)
}

// Claude Code in print mode (claude -p) has nobody to show pml's dialog
// to: it closes it (MCP elicitation "cancel") at once. pml tells the model
// that the client closed its dialog and no person answered, never that a
// person cancelled, and nothing runs.
func TestClaudeCodePrintModeApprovalSaysNoPersonAnswered(t *testing.T) {
	m, bin := claudeMachine(t)
	dir, marker := m.project("asked")
	m.pmlInit(dir)
	if !strings.Contains(m.initSaid, "in print mode (claude -p) nobody sees it") {
		t.Errorf("pml init does not say what print mode does with approvals:\n%s", m.initSaid)
	}
	// The read is asked, not allowed: it needs a person.
	if err := os.WriteFile(filepath.Join(dir, ".pml.json"), []byte(`{"permissions": {"allow": [], "ask": ["filesystem:read_file"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	approveProjectServer(t, m, dir)
	began := time.Now()
	r := claudeRead(m, dir, bin)
	t.Logf("claude -p: exit %d after %s\n%s", r.code, time.Since(began).Round(time.Second), tail(r.stdout, 2000))
	if m.model.sawMarker(marker) || strings.Contains(r.stdout, marker) {
		t.Fatalf("the read ran with nobody there to approve it:\n%s", r.stdout)
	}
	if !m.model.sawMarker("the client closed pml's dialog; no person answered") {
		m.model.dump(t)
		t.Fatalf("the model was not told that no person answered: exit %d\n%s\n%s", r.code, r.stdout, tail(r.stderr, 3000))
	}
	if m.model.sawMarker("the person") {
		m.model.dump(t)
		t.Errorf("the model was told of a person's answer")
	}
}
