//go:build realclients

package realclients

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Claude Code 2.1.332, pointed at the scripted model by
// ANTHROPIC_BASE_URL.
const claudeDir = "claude-code-2.1.332"

// claudeModel is the model the runs name (the scripted model answers
// any name; Claude Code warns of one due to retire).
const claudeModel = "claude-sonnet-5"

// modernEra is the line of Claude Code's debug log that says which MCP
// era and revision it agreed with pml.
var modernEra = regexp.MustCompile(`MCP server "pml": Connection established with capabilities: .*"protocolEra":"modern","negotiatedProtocolVersion":"2026-07-28"`)

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
	return m.run(dir, 4*time.Minute, bin, "-p", "Read hello.txt with pml and quote it.", "--allowedTools", "mcp__pml", "--model", claudeModel)
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

// everythingImage is the third-party server the modern-era tests call
// (the go-sdk v1.8.0 "everything" example; e2e/testservers builds it).
const everythingImage = "pml-test/everything:1.8.0"

// needImage fails when a test server's image is not on the daemon (make
// test-clients builds it first; a skip would hide the test).
func needImage(t *testing.T, image string) {
	t.Helper()
	if err := exec.Command("docker", "image", "inspect", image).Run(); err != nil {
		t.Fatalf("image %s is missing: run `make images` (it builds it locally, no registry needed): %v", image, err)
	}
}

// greetsThroughPML sets up a project whose .pml.json runs the everything
// server with its greet tool allowed, and sets the model's task to call
// greet with a marker of its own; it returns the project and what the
// result that reaches the model holds ("Hi <marker>").
func greetsThroughPML(t *testing.T, m *machine, name string) (string, string) {
	t.Helper()
	needImage(t, everythingImage)
	dir, _ := m.project(name)
	cfg := fmt.Sprintf(`{"permissions": {"allow": ["everything:greet"]}, "mcps": {"everything": {"image": %q}}}`, everythingImage)
	if err := os.WriteFile(filepath.Join(dir, ".pml.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// What the person answers when pml asks to trust the file.
	if r := m.run(dir, time.Minute, pmlBin, "trust", "--yes"); r.code != 0 {
		t.Fatalf("pml trust --yes: exit %d\n%s", r.code, r.stderr)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	who := "person-" + hex.EncodeToString(b)
	want := "Hi " + who
	m.model.setTask(task{suffix: "everything__greet", args: fmt.Sprintf(`{"name":%q}`, who), result: regexp.MustCompile(regexp.QuoteMeta(want))})
	return dir, want
}

// Claude Code (dual era: it probes server/discover and speaks MCP
// 2026-07-28 where the server offers it, as pml stdio does) calls a
// third-party server's tool through pml: the result reaches the model,
// and Claude Code's debug log shows the modern era and no result it had
// to mend ("… result omits required fields …; filled in resultType …",
// what it logs for each method whose result lacks what 2026-07-28
// requires, where a strict client fails the call).
func TestClaudeCodeCallsAServersToolInTheModernEra(t *testing.T) {
	m, bin := claudeMachine(t)
	dir, want := greetsThroughPML(t, m, "modern")
	m.pmlInit(dir)
	approveProjectServer(t, m, dir)
	debug := filepath.Join(m.home, "claude-debug.log")
	r := m.run(dir, 4*time.Minute, bin, "-p", "Greet me with pml.", "--allowedTools", "mcp__pml", "--model", claudeModel, "--debug-file", debug)
	logb, _ := os.ReadFile(debug)
	log := string(logb)
	if r.code != 0 || !m.model.sawMarker(want) || !strings.Contains(r.stdout, want) {
		m.model.dump(t)
		t.Fatalf("claude did not get %q from everything:greet through pml: exit %d\nstdout:\n%s\nstderr:\n%s\ndebug log:\n%s", want, r.code, r.stdout, tail(r.stderr, 3000), tail(log, 8000))
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "omits required fields") || strings.Contains(line, "filled in resultType") {
			t.Errorf("Claude Code mended a result of pml's: %s", line)
		}
	}
	if !modernEra.MatchString(log) {
		t.Errorf("Claude Code's debug log does not say it spoke MCP 2026-07-28 to pml:\n%s", tail(log, 8000))
	}
}
