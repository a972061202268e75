package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/clients"
	"github.com/pml-dev/pml/internal/config"
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
	if got := p.read(".cursor/mcp.json"); !strings.Contains(got, `"command": "`+testExe+`"`) || strings.Contains(got, p.dir) {
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

// Without --client: Claude Code only. Installed clients are named with
// the command that configures each, never written: a client directory in
// $HOME says nothing about what the repository should hold.
func TestInitNamesTheDetectedClients(t *testing.T) {
	p := newProject(t)
	for _, d := range []string{".cursor", ".gemini", ".codex", ".codeium/windsurf"} {
		if err := os.MkdirAll(filepath.Join(p.home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(p.config, "opencode"), 0o755); err != nil { // $XDG_CONFIG_HOME/opencode
		t.Fatal(err)
	}
	term := newFakeTerm(false, strings.NewReader(""), nil)
	if err := p.init(initOptions{}, term); err != nil {
		t.Fatalf("%v\n%s", err, term.out)
	}
	got := p.snapshot()
	var names []string
	for f := range got {
		if !strings.HasPrefix(f, "/.pml/") { // pml's state
			names = append(names, f)
		}
	}
	slices.Sort(names)
	if want := []string{"/.gitignore", "/.mcp.json", "/.pml.json"}; !slices.Equal(names, want) {
		t.Errorf("files written: %v, want %v", names, want)
	}
	if _, err := os.Stat(filepath.Join(p.home, ".codeium/windsurf/mcp_config.json")); err == nil {
		t.Error("a user-level file was written without --client")
	}
	out := term.out.String()
	for _, w := range []string{
		"cursor: installed, not configured; pml init --client cursor writes .cursor/mcp.json",
		"gemini-cli: installed, not configured; pml init --client gemini-cli writes .gemini/settings.json",
		"codex: installed, not configured; pml init --client codex writes .codex/config.toml",
		"opencode: installed, not configured; pml init --client opencode writes opencode.json",
		"windsurf: installed, not configured; pml init --client windsurf --scope user writes " + filepath.Join(p.home, ".codeium/windsurf/mcp_config.json"),
		"claude-code: open Claude Code in " + p.dir + " and approve the project server pml",
	} {
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
	term := newFakeTerm(true, strings.NewReader("y\n\n"), nil) // y: merge; Enter: no key
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

// onPath puts an executable pml on PATH and returns its path and an
// environment for init in which it is found.
func (p *project) onPath(t *testing.T) (exe string, getenv func(string) string) {
	bin := t.TempDir()
	exe = filepath.Join(bin, "pml")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe, func(k string) string {
		if k == "PATH" {
			return "/nonexistent:" + bin
		}
		return p.env(k)
	}
}

// No file init writes for any client, at any scope, holds the workspace
// or pml's own path: the pml on PATH is this one, so "pml" is written.
func TestInitClientFilesHoldNoMachinePath(t *testing.T) {
	for _, c := range clients.All {
		for _, scope := range c.Scopes() {
			t.Run(c.Name+"/"+string(scope), func(t *testing.T) {
				p := newProject(t)
				exe, getenv := p.onPath(t)
				term := newFakeTerm(false, strings.NewReader(""), nil)
				o := initOptions{yes: true, local: true, clients: []string{c.Name}, scope: string(scope), cloudURL: config.DefaultCloudURL}
				if err := runInit(context.Background(), o, term.terminal, getenv, p.dir, exe); err != nil {
					t.Fatalf("%v\n%s", err, term.out)
				}
				path, err := c.Path(scope, p.dir, clients.EnvFrom(getenv))
				if err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%s not written: %v", path, err)
				}
				for _, bad := range []string{p.dir, exe, filepath.Dir(exe), "PML_WORKSPACE"} {
					if strings.Contains(string(b), bad) {
						t.Errorf("%s holds %s:\n%s", path, bad, b)
					}
				}
				st := c.Status(scope, p.dir, clients.EnvFrom(getenv))
				if st.Scope != clients.Configured || st.Command != "pml" || strings.Join(st.Args, " ") != "stdio" {
					t.Errorf("read back: %+v", st)
				}
				if strings.Contains(term.out.String(), "the pml on PATH is not this one") {
					t.Errorf("the PATH note is printed although PATH's pml is this one:\n%s", term.out)
				}
			})
		}
	}
}

// When the pml on PATH is another one, the absolute path is written, and
// init says so.
func TestInitNamesThisPMLWhenPATHHasAnother(t *testing.T) {
	p := newProject(t)
	other, getenv := p.onPath(t)
	exe := filepath.Join(t.TempDir(), "pml")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	term := newFakeTerm(false, strings.NewReader(""), nil)
	o := initOptions{yes: true, local: true, cloudURL: config.DefaultCloudURL}
	if err := runInit(context.Background(), o, term.terminal, getenv, p.dir, exe); err != nil {
		t.Fatalf("%v\n%s", err, term.out)
	}
	if e := p.pmlEntry(); e["command"] != exe {
		t.Errorf("command = %v, want %s (PATH has %s)", e["command"], exe, other)
	}
	if !strings.Contains(term.out.String(), "the pml on PATH is not this one ("+exe+")") {
		t.Errorf("no note:\n%s", term.out)
	}
}

// A merged project file's backup is ignored by git, like .mcp.json's.
func TestInitIgnoresTheBackupsItMakes(t *testing.T) {
	p := newProject(t)
	if err := os.MkdirAll(filepath.Join(p.dir, ".gemini"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.write(".gemini/settings.json", `{"mcpServers": {"mem": {"command": "mem"}}}`)
	p.write(".mcp.json", otherServers)
	term := newFakeTerm(false, strings.NewReader(""), nil)
	if err := p.init(initOptions{yes: true, local: true, clients: []string{"claude-code", "gemini-cli"}}, term); err != nil {
		t.Fatalf("%v\n%s", err, term.out)
	}
	got := p.read(".gitignore")
	for _, w := range []string{".mcp.json.backup\n", ".gemini/settings.json.backup\n"} {
		if !strings.Contains(got, w) {
			t.Errorf(".gitignore lacks %q:\n%s", w, got)
		}
	}
	if !p.exists(".gemini/settings.json.backup") {
		t.Error("no backup made")
	}
}

// The closing lines name each configured client's trust step and the
// client's command that shows pml connected.
func TestInitClosingLinesNameEachClientsSteps(t *testing.T) {
	p := newProject(t)
	term := newFakeTerm(false, strings.NewReader(""), nil)
	if err := p.init(initOptions{local: true, clients: []string{"claude-code", "codex", "gemini-cli", "opencode"}}, term); err != nil {
		t.Fatalf("%v\n%s", err, term.out)
	}
	out := term.out.String()
	next := out[strings.Index(out, "Next:"):]
	for _, w := range []string{
		"claude-code: open Claude Code in " + p.dir + " and approve the project server pml", "claude mcp list",
		"codex: codex reads .codex/config.toml only in a trusted project", "codex mcp list",
		"gemini-cli: gemini reads .gemini/settings.json only when started in " + p.dir, "gemini mcp list",
		"opencode: restart it; opencode mcp list shows pml connected",
		// codex mcp list prints "enabled", not "connected".
		"then codex mcp list shows pml enabled",
		// codex exec and gemini -p never ask for the folder's trust.
		"codex exec never asks", "gemini -p never asks",
		// Whether approvals reach a person, per client.
		"approvals reach you in Claude Code's own dialog", "no person answered",
		"opencode has no dialog for pml's approvals: its model answers them itself",
		"gemini-cli has no dialog for pml's approvals", "--yolo",
		// and how to require one, proposed for the clients without a dialog.
		`"hil": {"require_elicitation": true}`,
	} {
		if !strings.Contains(next, w) {
			t.Errorf("closing lines lack %q:\n%s", w, next)
		}
	}
	if strings.Contains(next, "codex mcp list shows pml connected") {
		t.Errorf("codex says enabled:\n%s", next)
	}
	if strings.Count(next, "\n  ") != 10 {
		t.Errorf("want two lines per client, the proposal and pml doctor's:\n%s", next)
	}
	// A project that already requires a person is not told to.
	p = newProject(t)
	p.write(".pml.json", `{"hil": {"require_elicitation": true}}`)
	term = newFakeTerm(false, strings.NewReader(""), nil)
	if err := p.init(initOptions{local: true, clients: []string{"opencode"}}, term); err != nil {
		t.Fatalf("%v\n%s", err, term.out)
	}
	if out := term.out.String(); strings.Contains(out, "to require a person") || !strings.Contains(out, "opencode has no dialog") {
		t.Errorf("with require_elicitation set:\n%s", out)
	}
}

// Continue reads ~/.continue/config.json when there is no config.yaml:
// init writes no config.yaml that would shadow it, and says what to add.
func TestInitContinueNeverShadowsConfigJSON(t *testing.T) {
	p := newProject(t)
	dir := filepath.Join(p.home, ".continue")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"models": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	before := p.snapshot()
	err := p.init(initOptions{yes: true, local: true, clients: []string{"continue"}, scope: "user"}, newFakeTerm(false, strings.NewReader(""), nil))
	if exitCode(err) != 2 || !strings.Contains(err.Error(), filepath.Join(dir, "config.json")) || !strings.Contains(err.Error(), "modelContextProtocolServers") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.yaml")); err == nil {
		t.Error("config.yaml written beside config.json")
	}
	if !equalMaps(before, p.snapshot()) {
		t.Error("project files changed")
	}
	// With a config.yaml (Continue's current format), it is edited.
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("name: mine\nversion: 0.0.1\nschema: v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.init(initOptions{yes: true, local: true, clients: []string{"continue"}, scope: "user"}, newFakeTerm(false, strings.NewReader(""), nil)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "config.yaml")); !strings.Contains(string(b), "name: mine") || !strings.Contains(string(b), "command: /opt/pml/bin/pml") {
		t.Errorf("config.yaml:\n%s", b)
	}
}
