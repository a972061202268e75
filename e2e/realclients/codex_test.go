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

// codex 0.171.0 (the newest on npm; it SIGKILLs pml 30 ms after SIGTERM, so
// what pml had in flight is removed by pml stdio's exit watcher), pointed at
// the scripted model by a model_providers entry (base_url, wire_api =
// "responses") in its user configuration.
const codexDir = "codex-0.171.0"

// codexMachine writes ~/.codex/config.toml: the scripted provider, and
// the projects the person trusted (codex reads a project's
// .codex/config.toml only in a trusted project).
func codexMachine(t *testing.T) (*machine, string) {
	bin := clientBin(t, codexDir, "codex")
	m := newMachine(t, bin)
	m.extra = []string{"SCRIPTED_API_KEY=scripted-model-key"}
	if err := os.MkdirAll(filepath.Join(m.home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	codexTrust(t, m)
	return m, bin
}

// codexTrust writes ~/.codex/config.toml with dirs trusted, as codex
// does when the person answers its trust question.
func codexTrust(t *testing.T, m *machine, dirs ...string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "model = \"scripted\"\nmodel_provider = \"scripted\"\n\n[model_providers.scripted]\nname = \"scripted\"\nbase_url = %q\nwire_api = \"responses\"\nenv_key = \"SCRIPTED_API_KEY\"\n", m.model.URL()+"/v1")
	for _, d := range dirs {
		fmt.Fprintf(&b, "\n[projects.%q]\ntrust_level = \"trusted\"\n", d)
	}
	if err := os.WriteFile(filepath.Join(m.home, ".codex", "config.toml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func codexRead(m *machine, dir, bin string) result {
	return m.run(dir, 4*time.Minute, bin, "exec", "--skip-git-repo-check", "Read hello.txt with pml and quote it.")
}

func codexListsPML(t *testing.T, m *machine, dir, bin string) {
	t.Helper()
	r := m.run(dir, time.Minute, bin, "mcp", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "pml") {
		t.Fatalf("codex mcp list: exit %d\n%s\n%s", r.code, r.stdout, tail(r.stderr, 3000))
	}
	t.Logf("codex mcp list:\n%s", r.stdout)
	m.showsAsInitSaid("codex", r.stdout)
}

// pml init --client codex in a trusted project: codex lists pml, offers
// its tools to the model and reads the project's file through pml; a
// copy of the project (trusted too) serves the copy.
func TestCodexProjectFile(t *testing.T) {
	m, bin := codexMachine(t)
	dir, marker := m.project("first")
	codexTrust(t, m, dir, filepath.Join(m.home, "src", "clone"))
	m.pmlInit(dir, "--client", "codex")
	noMachinePath(t, filepath.Join(dir, ".codex", "config.toml"), dir)
	codexListsPML(t, m, dir, bin)
	m.readsThroughPML("codex", codexRead(m, dir, bin), marker)
	clone, cloneMarker := m.copyProject(dir, "clone")
	m.readsThroughPML("codex in the copy", codexRead(m, clone, bin), cloneMarker)
}

// One user-level entry (pml init --client codex --scope user, merged
// into the person's ~/.codex/config.toml) serves every project.
func TestCodexUserEntryServesEveryProject(t *testing.T) {
	m, bin := codexMachine(t)
	one, marker1 := m.project("one")
	two, marker2 := m.project("two")
	m.pmlInit(one, "--client", "codex", "--scope", "user")
	noMachinePath(t, filepath.Join(m.home, ".codex", "config.toml"), one)
	codexListsPML(t, m, two, bin)
	m.readsThroughPML("codex in project one", codexRead(m, one, bin), marker1)
	m.readsThroughPML("codex in project two", codexRead(m, two, bin), marker2)
}
