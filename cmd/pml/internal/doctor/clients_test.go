package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pml doctor checks every client file that names pml, not .mcp.json
// alone: a gemini-cli set-up is not "no .mcp.json", and an entry that
// pins another workspace, runs another pml or names an absolute path is
// a warning that says which file and what to run.
func TestDoctorChecksEveryConfiguredClientFile(t *testing.T) {
	p := newProject(t)
	exe, getenv := p.exe, p.env
	t.Setenv("PATH", getenv("PATH")) // launchProblem looks "pml" up on the process's PATH
	find := func(checks []Check, name string) Check {
		for _, c := range checks {
			if c.name == name {
				return c
			}
		}
		return Check{}
	}

	none := checkClientFiles(p.dir, exe, getenv)
	if len(none) != 1 || none[0].status != "warn" || !strings.Contains(none[0].detail, "no MCP client file names pml") {
		t.Fatalf("no client configured: %+v", none)
	}

	if err := os.MkdirAll(filepath.Join(p.dir, ".gemini"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.write(".gemini/settings.json", `{"mcpServers": {"pml": {"command": "pml", "args": ["stdio"]}}}`)
	got := checkClientFiles(p.dir, exe, getenv)
	if c := find(got, "gemini-cli"); c.status != "ok" || len(got) != 2 {
		t.Errorf("gemini-cli only, configured as init writes it: %+v", got)
	}
	// gemini-cli has no dialog for pml's approvals: doctor says so, with
	// how to require a person, until the project requires one.
	if c := find(got, "gemini-cli approvals"); c.status != "warn" || !strings.Contains(c.detail, "its model answers them itself") || !strings.Contains(c.fix, "require_elicitation") {
		t.Errorf("gemini-cli's approvals: %+v", c)
	}
	p.write(".pml.json", `{"hil": {"require_elicitation": true}}`)
	if c := find(checkClientFiles(p.dir, exe, getenv), "gemini-cli approvals"); c.status != "ok" || !strings.Contains(c.detail, "fails closed") {
		t.Errorf("gemini-cli's approvals with require_elicitation: %+v", c)
	}
	if err := os.Remove(filepath.Join(p.dir, ".pml.json")); err != nil {
		t.Fatal(err)
	}

	p.write(".gemini/settings.json", `{"mcpServers": {"pml": {"command": "pml", "args": ["stdio"], "env": {"PML_WORKSPACE": "/srv/first"}}}}`)
	if c := find(checkClientFiles(p.dir, exe, getenv), "gemini-cli"); c.status != "warn" || !strings.Contains(c.detail, "pins PML_WORKSPACE=/srv/first") || !strings.Contains(c.fix, "pml init --yes --client gemini-cli") {
		t.Errorf("a project file that pins a workspace: %+v", c)
	}

	p.write(".mcp.json", `{"mcpServers": {"pml": {"type": "stdio", "command": "/usr/local/bin/some-other-pml", "args": ["stdio"]}}}`)
	if c := find(checkClientFiles(p.dir, exe, getenv), ".mcp.json"); c.status != "warn" || !strings.Contains(c.detail, "some-other-pml") {
		t.Errorf("a .mcp.json naming a pml that does not exist: %+v", c)
	}
	p.write(".mcp.json", `{"mcpServers": {"pml": {"type": "stdio", "command": "`+exe+`", "args": ["stdio"]}}}`)
	if c := find(checkClientFiles(p.dir, exe, getenv), ".mcp.json"); c.status != "warn" || !strings.Contains(c.detail, "absolute path") {
		t.Errorf("a .mcp.json naming this pml by its absolute path: %+v", c)
	}
	if c := find(checkClientFiles(p.dir, exe, getenv), "claude-code approvals"); c.status != "ok" || !strings.Contains(c.detail, "no person answered") {
		t.Errorf("Claude Code's approvals: %+v", c)
	}

	codex := filepath.Join(p.home, ".codex", "config.toml")
	if err := os.MkdirAll(filepath.Dir(codex), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(codex, []byte("[mcp_servers.pml]\ncommand = \"pml\"\nargs = [\"stdio\"]\n\n[mcp_servers.pml.env]\nPML_WORKSPACE = \"/srv/first\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := find(checkClientFiles(p.dir, exe, getenv), "codex (user)"); c.status != "warn" || !strings.Contains(c.detail, "not this workspace "+p.dir) || !strings.Contains(c.fix, "--scope user") {
		t.Errorf("a user file pinned to another project: %+v", c)
	}
	if err := os.WriteFile(codex, []byte("[mcp_servers.pml]\ncommand = \"pml\"\nargs = [\"serve\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := find(checkClientFiles(p.dir, exe, getenv), "codex (user)"); c.status != "warn" || !strings.Contains(c.detail, `not ["stdio"]`) {
		t.Errorf("wrong args: %+v", c)
	}
	if err := os.WriteFile(codex, []byte("[mcp_servers.pml]\ncommand = \"pml\"\nargs = [\"stdio\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := find(checkClientFiles(p.dir, exe, getenv), "codex (user)"); c.status != "ok" {
		t.Errorf("a user file as init writes it: %+v", c)
	}
}

// project is a workspace, a home and a PATH whose "pml" is exe (a
// script that is never run: doctor only compares files).
type project struct {
	t              *testing.T
	dir, home, bin string
	exe            string
}

func newProject(t *testing.T) *project {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := &project{t: t, dir: dir, home: t.TempDir(), bin: t.TempDir()}
	p.exe = filepath.Join(p.bin, "pml")
	if err := os.WriteFile(p.exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *project) env(k string) string {
	return map[string]string{"PML_WORKSPACE": p.dir, "HOME": p.home, "PATH": "/nonexistent:" + p.bin}[k]
}

func (p *project) write(name, content string) {
	p.t.Helper()
	if err := os.WriteFile(filepath.Join(p.dir, name), []byte(content), 0o644); err != nil {
		p.t.Fatal(err)
	}
}
