//go:build realclients

package realclients

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// opencode 1.18.33, pointed at the scripted model by a provider of its
// own (@ai-sdk/openai-compatible with options.baseURL) in the user's
// configuration.
const opencodeDir = "opencode-1.18.33"

func opencodeMachine(t *testing.T) (*machine, string) {
	bin := clientBin(t, opencodeDir, "opencode")
	m := newMachine(t, bin)
	dir := filepath.Join(m.home, ".config", "opencode")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`{
  "$schema": "https://opencode.ai/config.json",
  "provider": {
    "scripted": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "Scripted",
      "options": {"baseURL": %q, "apiKey": "scripted-model-key"},
      "models": {"scripted": {"name": "Scripted", "tool_call": true}}
    }
  },
  "model": "scripted/scripted",
  "share": "disabled",
  "autoupdate": false
}
`, m.model.URL()+"/v1")
	if err := os.WriteFile(filepath.Join(dir, "opencode.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return m, bin
}

func opencodeConnected(t *testing.T, m *machine, dir, bin string) {
	t.Helper()
	r := m.run(dir, 2*time.Minute, bin, "mcp", "list")
	out := r.stdout + r.stderr
	if r.code != 0 || !strings.Contains(out, "pml") || !strings.Contains(strings.ToLower(out), "connected") {
		t.Fatalf("opencode mcp list: exit %d\n%s\n%s", r.code, r.stdout, tail(r.stderr, 3000))
	}
	m.showsAsInitSaid("opencode", out)
}

func opencodeRead(m *machine, dir, bin string) result {
	return m.run(dir, 5*time.Minute, bin, "run", "Read hello.txt with pml and quote it.")
}

// pml init --client opencode (opencode.json in the project): opencode
// lists pml connected, offers its tools and reads the project's file
// through pml; a copy of the project serves the copy.
func TestOpencodeProjectFile(t *testing.T) {
	m, bin := opencodeMachine(t)
	dir, marker := m.project("first")
	m.pmlInit(dir, "--client", "opencode")
	noMachinePath(t, filepath.Join(dir, "opencode.json"), dir)
	opencodeConnected(t, m, dir, bin)
	m.readsThroughPML("opencode", opencodeRead(m, dir, bin), marker)
	clone, cloneMarker := m.copyProject(dir, "clone")
	m.readsThroughPML("opencode in the copy", opencodeRead(m, clone, bin), cloneMarker)
}

// One user-level entry, merged into ~/.config/opencode/opencode.json,
// serves every project.
func TestOpencodeUserEntryServesEveryProject(t *testing.T) {
	m, bin := opencodeMachine(t)
	one, marker1 := m.project("one")
	two, marker2 := m.project("two")
	m.pmlInit(one, "--client", "opencode", "--scope", "user")
	noMachinePath(t, filepath.Join(m.home, ".config", "opencode", "opencode.json"), one)
	opencodeConnected(t, m, two, bin)
	m.readsThroughPML("opencode in project one", opencodeRead(m, one, bin), marker1)
	m.readsThroughPML("opencode in project two", opencodeRead(m, two, bin), marker2)
}
