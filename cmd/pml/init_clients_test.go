package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// --client writes exactly the clients named, each in its own file; the
// .mcp.json of Claude Code is not touched unless named.
func TestInitClientWritesOnlyTheNamedClients(t *testing.T) {
	p := newProject(t)
	term := newFakeTerm(false, strings.NewReader(""), nil)
	if err := p.init(initOptions{clients: []string{"cursor", "codex"}}, term); err != nil {
		t.Fatalf("%v\n%s", err, term.out)
	}
	if p.exists(".mcp.json") {
		t.Error(".mcp.json was written without --client claude-code")
	}
	if got := p.read(".cursor/mcp.json"); !strings.Contains(got, `"command": "`+testExe+`"`) || !strings.Contains(got, p.dir) {
		t.Errorf(".cursor/mcp.json:\n%s", got)
	}
	if got := p.read(".codex/config.toml"); !strings.Contains(got, "[mcp_servers.pml]") {
		t.Errorf(".codex/config.toml:\n%s", got)
	}
	out := term.out.String()
	for _, w := range []string{"cursor (project): .cursor/mcp.json created", "codex (project): .codex/config.toml created", ".mcp.json: not touched"} {
		if !strings.Contains(out, w) {
			t.Errorf("summary lacks %q:\n%s", w, out)
		}
	}
}

// Without --client: Claude Code, plus the installed clients with a
// project file; an installed client with only a user file is named, not
// written.
func TestInitConfiguresTheDetectedClients(t *testing.T) {
	p := newProject(t)
	for _, d := range []string{".cursor", ".gemini", ".codeium/windsurf"} {
		if err := os.MkdirAll(filepath.Join(p.home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	term := newFakeTerm(false, strings.NewReader(""), nil)
	if err := p.init(initOptions{}, term); err != nil {
		t.Fatalf("%v\n%s", err, term.out)
	}
	for _, f := range []string{".mcp.json", ".cursor/mcp.json", ".gemini/settings.json"} {
		if !p.exists(f) {
			t.Errorf("%s not written", f)
		}
	}
	for _, f := range []string{".vscode/mcp.json", "opencode.json"} {
		if p.exists(f) {
			t.Errorf("%s written for a client that is not installed", f)
		}
	}
	if _, err := os.Stat(filepath.Join(p.home, ".codeium/windsurf/mcp_config.json")); err == nil {
		t.Error("a user-level file was written without --client")
	}
	out := term.out.String()
	for _, w := range []string{"cursor (project, detected)", "gemini-cli (project, detected)", "windsurf: installed, not configured", "pml init --client windsurf"} {
		if !strings.Contains(out, w) {
			t.Errorf("summary lacks %q:\n%s", w, out)
		}
	}
}

// Changing an existing client file needs consent, like .mcp.json; the
// file is backed up and its other servers kept.
func TestInitClientMergeNeedsConsent(t *testing.T) {
	p := newProject(t)
	zed := filepath.Join(p.config, "zed", "settings.json") // $XDG_CONFIG_HOME/zed
	if err := os.MkdirAll(filepath.Dir(zed), 0o755); err != nil {
		t.Fatal(err)
	}
	old := "// mine\n{\n  \"context_servers\": {\"pg\": {\"command\": \"pg-mcp\"}}\n}\n"
	if err := os.WriteFile(zed, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	o := initOptions{clients: []string{"zed"}, scope: "user"}
	err := p.init(o, newFakeTerm(false, strings.NewReader(""), nil))
	if exitCode(err) != 2 || !strings.Contains(err.Error(), zed) || !strings.Contains(err.Error(), "keeping the other server pg") || !strings.Contains(err.Error(), "Nothing was written") {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(zed); string(b) != old || p.exists(".pml.json") {
		t.Fatal("something was written without consent")
	}
	term := newFakeTerm(true, strings.NewReader("\ny\n"), nil) // Enter: no key; y: merge
	if err := p.init(o, term); err != nil {
		t.Fatalf("%v\n%s", err, term.out)
	}
	b, _ := os.ReadFile(zed)
	if !strings.HasPrefix(string(b), "// mine\n") || !strings.Contains(string(b), `"pg"`) || !strings.Contains(string(b), testExe) {
		t.Errorf("zed settings:\n%s", b)
	}
	if bk, _ := os.ReadFile(zed + ".backup"); string(bk) != old {
		t.Error("no backup")
	}
}

func TestInitClientFlagsAreChecked(t *testing.T) {
	for _, c := range []struct {
		o    initOptions
		want string
	}{
		{initOptions{clients: []string{"emacs"}}, "unknown client \"emacs\""},
		{initOptions{clients: []string{"windsurf"}, scope: "project"}, "no project-level configuration"},
		{initOptions{scope: "global"}, "--scope \"global\""},
	} {
		p := newProject(t)
		before := p.snapshot()
		err := p.init(c.o, newFakeTerm(false, strings.NewReader(""), nil))
		if exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v, want exit 2 with %q", c.o, err, c.want)
		}
		if !equalMaps(before, p.snapshot()) {
			t.Errorf("%+v: files changed", c.o)
		}
	}
}

// An explicit user-only client goes to its user file without --scope.
func TestInitUserOnlyClient(t *testing.T) {
	p := newProject(t)
	term := newFakeTerm(false, strings.NewReader(""), nil)
	if err := p.init(initOptions{clients: []string{"goose"}}, term); err != nil {
		t.Fatalf("%v\n%s", err, term.out)
	}
	b, err := os.ReadFile(filepath.Join(p.config, "goose", "config.yaml"))
	if err != nil || !strings.Contains(string(b), "cmd: "+testExe) {
		t.Errorf("goose config: %v\n%s", err, b)
	}
}

func TestGitignoreDropOwn(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		dropped        []string
	}{
		{"pml's own block loses .mcp.json and .pml.json", "node_modules/\n# pml (pml init)\n.pml/\n.pml.json\n.mcp.json\n.mcp.json.backup\n", "node_modules/\n# pml (pml init)\n.pml/\n.mcp.json.backup\n", []string{".pml.json", ".mcp.json"}},
		{"the user's own lines stay", ".mcp.json\n.pml.json\n# pml (pml init)\n.pml/\n", ".mcp.json\n.pml.json\n# pml (pml init)\n.pml/\n", nil},
		{"a line after pml's block (a blank line between) is the user's", "# pml (pml init)\n.pml/\n\n.mcp.json\n", "# pml (pml init)\n.pml/\n\n.mcp.json\n", nil},
		{"a line under another comment is the user's", "# pml (pml init)\n.pml/\n# mine\n.mcp.json\n", "# pml (pml init)\n.pml/\n# mine\n.mcp.json\n", nil},
		{"no .gitignore", "", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, dropped := gitignoreDropOwn([]byte(c.in), ".pml.json", ".mcp.json")
			if string(got) != c.want || !slices.Equal(dropped, c.dropped) {
				t.Errorf("got %q, %v; want %q, %v", got, dropped, c.want, c.dropped)
			}
		})
	}
}

// An older pml's set-up: the key in .mcp.json, .mcp.json in pml's block
// of .gitignore. init --yes moves the key out and un-ignores the file.
func TestInitUndoesTheOldGitignoreEntry(t *testing.T) {
	p := newProject(t)
	p.write(".mcp.json", `{"mcpServers": {"pml": {"command": "/old/pml", "args": ["stdio"], "env": {"PML_API_KEY": "sk-9"}}}}`)
	p.write(".gitignore", "dist/\n# pml (pml init)\n.pml/\n.pml.json\n.mcp.json\n.mcp.json.backup\n")
	term := newFakeTerm(false, strings.NewReader(""), nil)
	if err := p.init(initOptions{yes: true}, term); err != nil {
		t.Fatalf("%v\n%s", err, term.out)
	}
	if got := p.read(".gitignore"); got != "dist/\n# pml (pml init)\n.pml.local.json\n.pml/\n.mcp.json.backup\n" {
		t.Errorf(".gitignore = %q", got)
	}
	if !strings.Contains(term.out.String(), "removed the .mcp.json line an older pml added") || !strings.Contains(term.out.String(), "removed the .pml.json line an older pml added (it is the team's policy: commit it") {
		t.Errorf("summary:\n%s", term.out)
	}
}
