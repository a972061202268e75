package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/clients"
)

func TestClientRows(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	env := clients.Env{Home: home, GOOS: "linux", Getenv: func(string) string { return "" }}
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o755); err != nil {
		t.Fatal(err)
	}
	codex, _ := clients.Lookup("codex")
	e, err := codex.Plan(clients.User, ws, env, clients.Server{Command: "/pml", Args: []string{"stdio"}, Env: map[string]string{"PML_WORKSPACE": "/elsewhere"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Write(); err != nil {
		t.Fatal(err)
	}
	rows := clientRows(ws, env)
	if len(rows) != len(clients.All) {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range rows {
		switch r.Name {
		case "codex":
			if !r.Installed || r.User.State != "other-workspace" || r.User.Workspace != "/elsewhere" || r.Project == nil || r.Project.State != "not-configured" {
				t.Errorf("codex: %+v %+v", r, r.Project)
			}
		case "windsurf":
			if r.Installed || r.Project != nil {
				t.Errorf("windsurf: %+v", r)
			}
		}
	}
	var b bytes.Buffer
	printClients(&b, ws, rows)
	if !strings.Contains(b.String(), "other-workspace (/elsewhere)") || !strings.Contains(b.String(), "not-configured .codex/config.toml") {
		t.Errorf("table:\n%s", b.String())
	}
}
