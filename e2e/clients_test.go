//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/tailscale/hujson"
)

// pml init --client writes each client's own file in its own format, and
// a pml started exactly as that file says, in the project (a
// subdirectory of it), serves this workspace, though no file names it;
// pml clients then reports those clients configured.
func TestInitClientsAndTheirFilesStartPML(t *testing.T) {
	ws := newWorkspace(t, "")
	home := t.TempDir()
	userEnv := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
	// Cursor is installed, with a server of its own and a comment-free
	// user file; the other clients are not.
	if err := os.MkdirAll(filepath.Join(home, ".cursor"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, ws.Dir, userEnv, "", "init", "--yes", "--local", "--client", "cursor,opencode", "--client", "codex")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(ws.path(".mcp.json")); err == nil {
		t.Error(".mcp.json written without --client claude-code")
	}

	type launch struct {
		command string
		args    []string
		env     map[string]string
	}
	var got = map[string]launch{}
	// Cursor: JSON, mcpServers.
	var cursor struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(readFile(t, ws.path(".cursor/mcp.json"))), &cursor); err != nil {
		t.Fatal(err)
	}
	e := cursor.MCPServers["pml"]
	got["cursor"] = launch{e.Command, e.Args, e.Env}
	// opencode: JSON with comments allowed, mcp.pml, the command one array.
	std, err := hujson.Standardize([]byte(readFile(t, ws.path("opencode.json"))))
	if err != nil {
		t.Fatal(err)
	}
	var oc struct {
		MCP map[string]struct {
			Type        string            `json:"type"`
			Command     []string          `json:"command"`
			Environment map[string]string `json:"environment"`
		} `json:"mcp"`
	}
	if err := json.Unmarshal(std, &oc); err != nil {
		t.Fatal(err)
	}
	if o := oc.MCP["pml"]; o.Type == "local" && len(o.Command) > 0 {
		got["opencode"] = launch{o.Command[0], o.Command[1:], o.Environment}
	}
	// Codex: TOML, [mcp_servers.pml].
	var cx struct {
		MCPServers map[string]struct {
			Command string            `toml:"command"`
			Args    []string          `toml:"args"`
			Env     map[string]string `toml:"env"`
		} `toml:"mcp_servers"`
	}
	if err := toml.Unmarshal([]byte(readFile(t, ws.path(".codex/config.toml"))), &cx); err != nil {
		t.Fatal(err)
	}
	c := cx.MCPServers["pml"]
	got["codex"] = launch{c.Command, c.Args, c.Env}

	clientFiles := map[string]string{"cursor": ".cursor/mcp.json", "opencode": "opencode.json", "codex": ".codex/config.toml"}
	for _, name := range []string{"cursor", "opencode", "codex"} {
		l, ok := got[name]
		if !ok || l.command == "" {
			t.Errorf("%s: no pml server in its file", name)
			continue
		}
		if l.env["PML_WORKSPACE"] != "" || strings.Contains(readFile(t, ws.path(clientFiles[name])), ws.Dir) {
			t.Errorf("%s: its file pins the workspace %s", name, ws.Dir)
		}
		// From a subdirectory too: pml walks up to the project's marker.
		sub := filepath.Join(ws.Dir, "src", "deep")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		s := startAsConfigured(t, sub, l.command, l.args, l.env, userEnv)
		if !listsTool(t, s.ClientSession, "filesystem:read_file") && !listsTool(t, s.ClientSession, "filesystem__read_file") {
			t.Errorf("%s: the pml it starts lists no filesystem tool", name)
		}
		if !s.logs(ws.Dir) {
			t.Errorf("%s: pml did not serve the workspace %s:\n%s", name, ws.Dir, s.stderr.String())
		}
		s.Close()
	}

	r = runCLI(t, ws.Dir, userEnv, "", "clients", "--format", "json")
	if r.code != 0 {
		t.Fatalf("pml clients: exit %d\n%s", r.code, r.stderr)
	}
	var out struct {
		Clients []struct {
			Name      string `json:"name"`
			Installed bool   `json:"installed"`
			Project   *struct {
				State string `json:"state"`
			} `json:"project"`
		} `json:"clients"`
	}
	if err := json.Unmarshal(r.stdout, &out); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	want := map[string]string{"cursor": "configured", "opencode": "configured", "codex": "configured", "claude-code": "not-configured", "vscode": "not-configured"}
	for _, cl := range out.Clients {
		if w, ok := want[cl.Name]; ok && (cl.Project == nil || cl.Project.State != w) {
			t.Errorf("%s: project %+v, want %s", cl.Name, cl.Project, w)
		}
		if cl.Installed != (cl.Name == "cursor") {
			t.Errorf("%s: installed = %v", cl.Name, cl.Installed)
		}
	}
	if len(out.Clients) != 12 {
		t.Errorf("%d clients listed, want 12", len(out.Clients))
	}
}

// On a machine where codex, gemini-cli and opencode are installed, pml
// init in a repository writes only .mcp.json, .pml.json and .gitignore,
// and prints the command that configures each of the others.
func TestInitWritesOnlyClaudeCodesFileAndNamesTheOthers(t *testing.T) {
	ws := newWorkspace(t, "")
	home := t.TempDir()
	userEnv := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
	for _, d := range []string{".codex", ".gemini", ".config/opencode"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshotFiles(t, ws.Dir)
	r := runCLI(t, ws.Dir, userEnv, "", "init", "--local")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	after := snapshotFiles(t, ws.Dir)
	var added []string
	for f := range after {
		if _, ok := before[f]; !ok && !strings.HasPrefix(f, "/.pml/") {
			added = append(added, f)
		}
	}
	slices.Sort(added)
	if want := []string{"/.gitignore", "/.mcp.json", "/.pml.json"}; !slices.Equal(added, want) {
		t.Errorf("files written: %v, want %v", added, want)
	}
	for _, w := range []string{
		"codex: installed, not configured; pml init --client codex writes .codex/config.toml",
		"gemini-cli: installed, not configured; pml init --client gemini-cli writes .gemini/settings.json",
		"opencode: installed, not configured; pml init --client opencode writes opencode.json",
	} {
		if !strings.Contains(logText(r.stderr), w) {
			t.Errorf("init does not say %q:\n%s", w, r.stderr)
		}
	}
}

// An existing client file that would change is left alone without
// --yes and without a terminal, and so is everything else.
func TestInitClientFileMergeNeedsConsent(t *testing.T) {
	ws := newWorkspace(t, "")
	home := t.TempDir()
	userEnv := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
	old := "{\n  // mine\n  \"mcpServers\": {\"memory\": {\"command\": \"mem\"}}\n}\n"
	ws.write(".gemini/settings.json", old)
	before := snapshotFiles(t, ws.Dir)
	r := runCLI(t, ws.Dir, userEnv, "", "init", "--local", "--client", "gemini-cli")
	if r.code != 2 || !strings.Contains(logText(r.stderr), ".gemini/settings.json") || !strings.Contains(logText(r.stderr), "Nothing was written") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if after := snapshotFiles(t, ws.Dir); len(after) != len(before) || after["/.gemini/settings.json"] != old {
		t.Errorf("files changed: %v", after)
	}
	r = runCLI(t, ws.Dir, userEnv, "", "init", "--local", "--yes", "--client", "gemini-cli")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	got := readFile(t, ws.path(".gemini/settings.json"))
	if !strings.Contains(got, "// mine") || !strings.Contains(got, `"memory"`) || !strings.Contains(got, `"pml"`) {
		t.Errorf(".gemini/settings.json:\n%s", got)
	}
	if readFile(t, ws.path(".gemini/settings.json.backup")) != old {
		t.Error("no backup")
	}
	if ignore := readFile(t, ws.path(".gitignore")); !strings.Contains(ignore, ".gemini/settings.json.backup\n") {
		t.Errorf("the backup is not ignored:\n%s", ignore)
	}
}
