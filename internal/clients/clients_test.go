package clients

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// testServer is the entry pml init writes: pml from PATH, no workspace.
var testServer = Server{Command: "pml", Args: []string{"stdio"}}

// golden compares got with testdata/name (rewritten with -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update once to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// Each client: an existing file with another server and comments (where
// the format has them) → the same file with pml's entry added; a new
// file; and setting the entry again changes nothing.
func TestGolden(t *testing.T) {
	for _, c := range All {
		t.Run(c.Name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", c.Name+".input"))
			if err != nil {
				t.Fatal(err)
			}
			out, others, err := c.format.set(in, testServer)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.Name+".golden", out)
			if len(others) == 0 {
				t.Errorf("other servers = %v, want the one in the input", others)
			}
			again, _, err := c.format.set(out, testServer)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("setting the entry again changed the file (%v):\n%s", err, again)
			}
			s, ok, err := c.format.entry(out)
			if err != nil || !ok || s.Command != testServer.Command || strings.Join(s.Args, " ") != "stdio" || s.Env["PML_WORKSPACE"] != "" {
				t.Errorf("entry read back = %+v, %v, %v", s, ok, err)
			}
			fresh, _, err := c.format.set(nil, testServer)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.Name+".new.golden", fresh)
			// What init writes travels: no workspace, no machine path.
			for _, f := range [][]byte{out, fresh} {
				if bytes.Contains(f, []byte("PML_WORKSPACE")) || bytes.Contains(f, []byte("/opt/")) || bytes.Contains(f, []byte("/home/me/project")) {
					t.Errorf("a file pml wrote pins a path:\n%s", f)
				}
			}
		})
	}
}

// An entry pml wrote before (maybe with a key an older pml put there, and
// the user's own additions) is updated: pml's keys are set, the key is
// removed, what the user added stays.
func TestUpdateKeepsTheUsersAdditions(t *testing.T) {
	cases := map[string]string{
		"cline": `{"mcpServers": {"pml": {"command": "/old/pml", "args": ["stdio"], "env": {"PML_API_KEY": "sk-old", "PML_WORKSPACE": "/old/ws", "DOCKER_HOST": "unix:///d.sock"}, "autoApprove": ["filesystem__read_file"]}}}`,
		"codex": "[mcp_servers.pml]\ncommand = \"/old/pml\"\nargs = [\"stdio\"]\nstartup_timeout_sec = 30\n\n[mcp_servers.pml.env]\nPML_API_KEY = \"sk-old\"\nPML_WORKSPACE = \"/old/ws\"\nDOCKER_HOST = \"unix:///d.sock\"\n\n# next\n[other]\nx = 1\n",
		"goose": "extensions:\n  pml:\n    cmd: /old/pml\n    envs:\n      PML_API_KEY: sk-old\n      PML_WORKSPACE: /old/ws\n      DOCKER_HOST: unix:///d.sock\n    bundled: false\n",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			c, _ := Lookup(name)
			out, _, err := c.format.set([]byte(in), testServer)
			if err != nil {
				t.Fatal(err)
			}
			s := string(out)
			if strings.Contains(s, "sk-old") || strings.Contains(s, "/old/") || !strings.Contains(s, "unix:///d.sock") {
				t.Errorf("not updated as expected:\n%s", s)
			}
			for _, kept := range map[string]string{"cline": "autoApprove", "codex": "startup_timeout_sec", "goose": "bundled"} {
				if name == "cline" && kept != "autoApprove" || name == "codex" && kept != "startup_timeout_sec" || name == "goose" && kept != "bundled" {
					continue
				}
				if !strings.Contains(s, kept) {
					t.Errorf("lost %s:\n%s", kept, s)
				}
			}
			if name == "codex" && !strings.Contains(s, "# next\n[other]") {
				t.Errorf("the comment before the next table was lost:\n%s", s)
			}
		})
	}
}

func TestInvalidFilesAreRefused(t *testing.T) {
	for _, c := range []struct{ client, in, want string }{
		{"cursor", `{"mcpServers": {,}}`, "not valid JSON"},
		{"cursor", `[]`, "not a JSON object"},
		{"vscode", `{"servers": []}`, `"servers" is not an object`},
		{"codex", "[mcp_servers\n", "not valid TOML"},
		{"codex", "mcp_servers = { pml = { command = \"x\" } }\n", "defined inline"},
		{"goose", "extensions: [a]\n", "not a mapping"},
		{"continue", "mcpServers: {a: 1}\n", "not a list"},
	} {
		cl, _ := Lookup(c.client)
		if _, _, err := cl.format.set([]byte(c.in), testServer); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: err = %v, want %q", c.client, c.in, err, c.want)
		}
	}
}

// The user-level paths, under a temporary home.
func TestUserPaths(t *testing.T) {
	home := t.TempDir()
	linux := Env{Home: home, GOOS: "linux", Getenv: func(string) string { return "" }}
	xdg := Env{Home: home, GOOS: "linux", Getenv: func(k string) string {
		return map[string]string{"XDG_CONFIG_HOME": "/xdg", "CODEX_HOME": "/codex"}[k]
	}}
	mac := Env{Home: home, GOOS: "darwin", Getenv: func(string) string { return "" }}
	want := []struct {
		client string
		env    Env
		path   string
	}{
		{"claude-code", linux, home + "/.claude.json"},
		{"claude-desktop", linux, home + "/.config/Claude/claude_desktop_config.json"},
		{"claude-desktop", mac, home + "/Library/Application Support/Claude/claude_desktop_config.json"},
		{"cursor", linux, home + "/.cursor/mcp.json"},
		{"vscode", linux, home + "/.config/Code/User/mcp.json"},
		{"vscode", mac, home + "/Library/Application Support/Code/User/mcp.json"},
		{"windsurf", linux, home + "/.codeium/windsurf/mcp_config.json"},
		{"codex", linux, home + "/.codex/config.toml"},
		{"codex", xdg, "/codex/config.toml"},
		{"gemini-cli", linux, home + "/.gemini/settings.json"},
		{"zed", linux, home + "/.config/zed/settings.json"},
		{"zed", xdg, "/xdg/zed/settings.json"},
		{"zed", mac, home + "/.config/zed/settings.json"},
		{"cline", linux, home + "/.config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json"},
		{"continue", linux, home + "/.continue/config.yaml"},
		{"goose", linux, home + "/.config/goose/config.yaml"},
		{"opencode", linux, home + "/.config/opencode/opencode.json"},
		{"opencode", xdg, "/xdg/opencode/opencode.json"},
	}
	for _, w := range want {
		c, err := Lookup(w.client)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := c.Path(User, "/ws", w.env); got != w.path {
			t.Errorf("%s (%s): %s, want %s", w.client, w.env.GOOS, got, w.path)
		}
	}
	project := map[string]string{"claude-code": ".mcp.json", "cursor": ".cursor/mcp.json", "vscode": ".vscode/mcp.json", "codex": ".codex/config.toml",
		"gemini-cli": ".gemini/settings.json", "zed": ".zed/settings.json", "continue": ".continue/mcpServers/pml.yaml", "opencode": "opencode.json"}
	for _, c := range All {
		got, err := c.Path(Project, "/ws", linux)
		if rel, ok := project[c.Name]; ok {
			if got != "/ws/"+rel || err != nil {
				t.Errorf("%s project file %s, %v", c.Name, got, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), "--scope user") {
			t.Errorf("%s has no project file but Path says %s, %v", c.Name, got, err)
		}
	}
	if _, err := Lookup("emacs"); err == nil || !strings.Contains(err.Error(), "claude-code, claude-desktop") {
		t.Errorf("unknown client: %v", err)
	}
}

func TestInstalledAndStatus(t *testing.T) {
	home := t.TempDir()
	ws := t.TempDir()
	env := Env{Home: home, GOOS: "linux", Getenv: func(string) string { return "" }}
	cursor, _ := Lookup("cursor")
	if ok, _ := cursor.Installed(env); ok {
		t.Fatal("installed with no ~/.cursor")
	}
	if err := os.Mkdir(filepath.Join(home, ".cursor"), 0o755); err != nil {
		t.Fatal(err)
	}
	if ok, p := cursor.Installed(env); !ok || p != filepath.Join(home, ".cursor") {
		t.Errorf("installed = %v %s", ok, p)
	}
	if st := cursor.Status(Project, ws, env); st.Scope != Missing {
		t.Errorf("status without a file = %+v", st)
	}
	srv := Server{Command: "/pml", Args: []string{"stdio"}, Env: map[string]string{"PML_WORKSPACE": ws}}
	// (An entry that pins a workspace: Status tells this one from another.)
	for _, s := range []Scope{Project, User} {
		e, err := cursor.Plan(s, ws, env, srv)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Write(); err != nil {
			t.Fatal(err)
		}
		if st := cursor.Status(s, ws, env); st.Scope != Configured {
			t.Errorf("%s: status = %+v", s, st)
		}
		if st := cursor.Status(s, t.TempDir(), env); s == User && st.Scope != Elsewhere {
			t.Errorf("another workspace: status = %+v", st)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, ".cursor", "mcp.json"), []byte("{,"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st := cursor.Status(Project, ws, env); st.Scope != Unreadable || st.Err == nil {
		t.Errorf("broken file: status = %+v", st)
	}
}

func TestWrite(t *testing.T) {
	home := t.TempDir()
	ws := t.TempDir()
	env := Env{Home: home, GOOS: "linux", Getenv: func(string) string { return "" }}
	zed, _ := Lookup("zed")
	path, _ := zed.Path(User, ws, env)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile("testdata/zed.input")
	if err := os.WriteFile(path, old, 0o640); err != nil {
		t.Fatal(err)
	}
	e, err := zed.Plan(User, ws, env, testServer)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Merge() || strings.Join(e.Others, ",") != "postgres" {
		t.Errorf("merge %v, others %v", e.Merge(), e.Others)
	}
	backedUp, err := e.Write()
	if err != nil || !backedUp {
		t.Fatalf("Write = %v, %v", backedUp, err)
	}
	if b, _ := os.ReadFile(path + ".backup"); !bytes.Equal(b, old) {
		t.Error("the backup is not the old file")
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, e.New) {
		t.Error("the file is not the planned content")
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %04o, want the old 0640", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 2 {
		t.Errorf("files left in the directory: %v", entries)
	}

	// Changed between Plan and Write: nothing is written.
	e, _ = zed.Plan(User, ws, env, Server{Command: "/other/pml"})
	if err := os.WriteFile(path, []byte("{}\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Write(); !errors.Is(err, errChanged) {
		t.Errorf("a file changed since Plan: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "{}\n" {
		t.Error("a changed file was overwritten")
	}

	// A user file that is a link (dotfiles): the target is written, the
	// link stays.
	target := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(target, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cursor, _ := Lookup("cursor")
	link, _ := cursor.Path(User, ws, env)
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	e, err = cursor.Plan(User, ws, env, testServer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Write(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the link was replaced")
	}
	if b, _ := os.ReadFile(target); !bytes.Contains(b, []byte(`"command": "pml"`)) {
		t.Error("the link's target was not written")
	}

	// A project file that is a link is refused: the workspace may come
	// from anyone, and the link may point at a file of the user's.
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, ".cursor"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(ws, ".cursor", "mcp.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := cursor.Plan(Project, ws, env, testServer); err == nil {
		t.Error("a linked project file was accepted")
	}
	if b, _ := os.ReadFile(victim); string(b) != "{}\n" {
		t.Error("the link's target was written")
	}
}

// opencode reads opencode.jsonc too: an existing one is edited rather
// than a second file created beside it.
func TestOpencodeJSONC(t *testing.T) {
	ws := t.TempDir()
	env := Env{Home: t.TempDir(), GOOS: "linux", Getenv: func(string) string { return "" }}
	oc, _ := Lookup("opencode")
	if p, _ := oc.Path(Project, ws, env); p != filepath.Join(ws, "opencode.json") {
		t.Errorf("no file: %s", p)
	}
	if err := os.WriteFile(filepath.Join(ws, "opencode.jsonc"), []byte("{ // mine\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, _ := oc.Path(Project, ws, env); p != filepath.Join(ws, "opencode.jsonc") {
		t.Errorf("with opencode.jsonc: %s", p)
	}
}
