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

// gemini-cli 0.61.0, pointed at the scripted model by
// GOOGLE_GEMINI_BASE_URL.
const geminiDir = "gemini-cli-0.61.0"

// geminiMachine writes ~/.gemini/settings.json (an API key as the way in,
// folder trust on as by default) unless the test writes its own.
func geminiMachine(t *testing.T) (*machine, string) {
	bin := clientBin(t, geminiDir, "gemini")
	m := newMachine(t, bin)
	m.extra = []string{"GOOGLE_GEMINI_BASE_URL=" + m.model.URL(), "GEMINI_API_KEY=scripted-model-key"}
	if err := os.MkdirAll(filepath.Join(m.home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	settings := `{"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": true}}}`
	if err := os.WriteFile(filepath.Join(m.home, ".gemini", "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	return m, bin
}

// geminiTrust records dirs as trusted folders, as gemini does when the
// person answers its trust question.
func geminiTrust(t *testing.T, m *machine, dirs ...string) {
	t.Helper()
	doc := map[string]string{}
	for _, d := range dirs {
		doc[d] = "TRUST_FOLDER"
	}
	b, _ := json.Marshal(doc)
	if err := os.WriteFile(filepath.Join(m.home, ".gemini", "trustedFolders.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func geminiConnected(t *testing.T, m *machine, dir, bin string) {
	t.Helper()
	r := m.run(dir, 2*time.Minute, bin, "mcp", "list")
	out := r.stdout + r.stderr
	if r.code != 0 || !strings.Contains(out, "pml") || !strings.Contains(out, "Connected") {
		t.Fatalf("gemini mcp list: exit %d\n%s\n%s", r.code, r.stdout, tail(r.stderr, 3000))
	}
	m.showsAsInitSaid("gemini-cli", out)
}

func geminiRead(m *machine, dir, bin string) result {
	return m.run(dir, 4*time.Minute, bin, "-p", "Read hello.txt with pml and quote it.", "--yolo", "-m", "gemini-2.5-flash")
}

// pml init --client gemini-cli in a trusted folder, gemini started in
// the project's directory: it lists pml connected, offers its tools and
// reads the project's file through pml; a copy (trusted too) serves
// the copy.
func TestGeminiProjectFile(t *testing.T) {
	m, bin := geminiMachine(t)
	dir, marker := m.project("first")
	geminiTrust(t, m, dir, filepath.Join(m.home, "src", "clone"))
	m.pmlInit(dir, "--client", "gemini-cli")
	noMachinePath(t, filepath.Join(dir, ".gemini", "settings.json"), dir)
	geminiConnected(t, m, dir, bin)
	m.readsThroughPML("gemini", geminiRead(m, dir, bin), marker)
	clone, cloneMarker := m.copyProject(dir, "clone")
	m.readsThroughPML("gemini in the copy", geminiRead(m, clone, bin), cloneMarker)
}

// One user-level entry, merged into ~/.gemini/settings.json, serves
// every project.
func TestGeminiUserEntryServesEveryProject(t *testing.T) {
	m, bin := geminiMachine(t)
	one, marker1 := m.project("one")
	two, marker2 := m.project("two")
	geminiTrust(t, m, one, two)
	m.pmlInit(one, "--client", "gemini-cli", "--scope", "user")
	noMachinePath(t, filepath.Join(m.home, ".gemini", "settings.json"), one)
	geminiConnected(t, m, two, bin)
	m.readsThroughPML("gemini in project one", geminiRead(m, one, bin), marker1)
	m.readsThroughPML("gemini in project two", geminiRead(m, two, bin), marker2)
}
