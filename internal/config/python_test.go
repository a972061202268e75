package config

import (
	"strings"
	"testing"
)

// A uvx or python -m entry without an image gets the derived Python
// container: pml/python:3.11, pip into /deps, locked at its first install.
func TestAUvxEntryIsDerived(t *testing.T) {
	c, err := Parse(".pml.json", []byte(`{"mcps": {
  "time": {"command": "uvx", "args": ["mcp-server-time@2025.9.25", "--local-timezone", "UTC"], "env": {"A": "1"}},
  "git": {"command": "uvx", "args": ["--from", "mcp-server-git", "mcp-server-git", "--repository", "."]},
  "fetch": {"command": "python", "args": ["-m", "mcp_server_fetch"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	time := c.Servers["time"]
	if time.Image != PythonImage || time.Command != "python3" || time.Args[0] != "-c" || time.Args[2] != "mcp-server-time" ||
		strings.Join(time.Args[4:], " ") != "--local-timezone UTC" || time.Env["PYTHONPATH"] != PythonPath || time.Env["A"] != "1" {
		t.Errorf("time: %s %s %q %v", time.Image, time.Command, time.Args, time.Env)
	}
	if time.Install == nil || time.Install.Command != "pip" || time.Install.Args[1] != "mcp-server-time==2025.9.25" || time.Install.Package != "mcp-server-time" {
		t.Errorf("time's install: %+v", time.Install)
	}
	if git := c.Servers["git"]; git.Install.Args[1] != "mcp-server-git" || strings.Join(git.Args[2:], " ") != "mcp-server-git mcp-server-git --repository ." {
		t.Errorf("git: %q %+v", git.Args, git.Install)
	}
	if fetch := c.Servers["fetch"]; strings.Join(fetch.Args, " ") != "-m mcp_server_fetch" || fetch.Install.Package != "mcp-server-fetch" {
		t.Errorf("fetch: %q %+v", fetch.Args, fetch.Install)
	}
	for doc, want := range map[string]string{
		`{"mcps": {"x": {"command": "uvx", "args": ["--with", "y", "x"]}}}`:                                "--with",
		`{"mcps": {"x": {"command": "uvx", "args": ["../evil"]}}}`:                                         "not a Python package",
		`{"mcps": {"x": {"command": "uvx", "args": []}}}`:                                                  "names no package",
		`{"mcps": {"x": {"command": "node"}}}`:                                                             "image",
		`{"mcps": {"x": {"command": "uvx", "args": ["x"], "install": {"command": "pip", "args": ["y"]}}}}`: "both",
	} {
		if _, err := Parse(".pml.json", []byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
}
