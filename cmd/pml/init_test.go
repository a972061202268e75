package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/permit"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/credentials"
)

const testExe = "/opt/pml/bin/pml"

// fakeTerm is a terminal whose answers are given in advance.
type fakeTerm struct {
	*terminal
	out      *bytes.Buffer
	hidden   int // times echo was turned off
	restored int
}

func newFakeTerm(interactive bool, input io.Reader, hideErr error) *fakeTerm {
	f := &fakeTerm{out: &bytes.Buffer{}}
	f.terminal = &terminal{
		interactive: interactive,
		in:          bufio.NewReader(input),
		out:         f.out,
		hide: func() (func(), error) {
			if hideErr != nil {
				return nil, hideErr
			}
			f.hidden++
			return func() { f.restored++ }, nil
		},
	}
	return f
}

type project struct {
	t   *testing.T
	dir string
	// config is XDG_CONFIG_HOME: the user's credentials file is beneath.
	config string
	// home is HOME: where clients' user-level files and directories are.
	home string
}

func newProject(t *testing.T) *project {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &project{t: t, dir: dir, config: t.TempDir(), home: t.TempDir()}
}

func (p *project) env(k string) string {
	switch k {
	case "PML_WORKSPACE":
		return p.dir
	case "XDG_CONFIG_HOME":
		return p.config
	case "HOME":
		return p.home
	}
	return ""
}

func (p *project) init(o initOptions, term *fakeTerm) error {
	if o.cloudURL == "" {
		o.cloudURL = config.DefaultCloudURL
	}
	return runInit(context.Background(), o, term.terminal, p.env, p.dir, testExe)
}

func (p *project) write(name, content string) {
	p.t.Helper()
	if err := os.WriteFile(filepath.Join(p.dir, name), []byte(content), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

func (p *project) read(name string) string {
	p.t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dir, name))
	if err != nil {
		p.t.Fatal(err)
	}
	return string(b)
}

func (p *project) exists(name string) bool {
	_, err := os.Lstat(filepath.Join(p.dir, name))
	return err == nil
}

// snapshot maps every file of the project to its content.
func (p *project) snapshot() map[string]string {
	p.t.Helper()
	out := map[string]string{}
	err := filepath.Walk(p.dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		out[strings.TrimPrefix(path, p.dir)] = string(b)
		return err
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

func (p *project) pmlEntry() map[string]any {
	p.t.Helper()
	var doc struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(p.read(".mcp.json")), &doc); err != nil {
		p.t.Fatal(err)
	}
	return doc.MCPServers["pml"]
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return -1
	}
	return 0
}

const otherServers = `{
  "mcpServers": {
    "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"]}
  },
  "x-team-setting": {"keep": true}
}
`

func TestInitOnAnEmptyProjectWithoutATerminal(t *testing.T) {
	p := newProject(t)
	term := newFakeTerm(false, strings.NewReader(""), nil)
	if err := p.init(initOptions{}, term); err != nil {
		t.Fatal(err)
	}
	e := p.pmlEntry()
	env, _ := e["env"].(map[string]any)
	if e["command"] != testExe || e["type"] != "stdio" || env != nil {
		t.Errorf("pml entry = %v", e)
	}
	cfg, err := config.Load(p.dir, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) > 0 || cfg.Cloud.URL != config.DefaultCloudURL {
		t.Errorf(".pml.json: cloud %q, warnings %v", cfg.Cloud.URL, cfg.Warnings)
	}
	// The file decides exactly as pml's built-in defaults do.
	perms := permit.PermissionsFrom(cfg)
	for _, tool := range []string{"filesystem:read_file", "filesystem:list_directory", "filesystem:write_file", "filesystem:move_file", "shell:exec", "json:parse"} {
		got, _ := perms.Decide(tool)
		want, _ := permit.DefaultPermissions().Decide(tool)
		if got != want {
			t.Errorf("%s: .pml.json says %s, the defaults %s", tool, got, want)
		}
	}
	if d, _ := perms.Decide("shell:exec"); d != call.Ask {
		t.Errorf("shell:exec is %s, want ask", d)
	}
	// "Always" (an exact name added to allow) must then allow the tool.
	always := permit.Permissions{Allow: append(perms.Allow, "filesystem:write_file"), Ask: perms.Ask, Deny: perms.Deny}
	if d, _ := always.Decide("filesystem:write_file"); d != call.Allow {
		t.Errorf("after Always, filesystem:write_file is %s", d)
	}
	if got := p.read(".gitignore"); strings.Count(got, ".pml/\n") != 1 || strings.Count(got, ".pml.local.json\n") != 1 || strings.Contains(got, ".pml.json\n") || strings.Contains(got, ".mcp.json") {
		t.Errorf(".gitignore = %q", got)
	}
	if term.hidden != 0 || !strings.Contains(term.out.String(), "local mode") {
		t.Errorf("without a terminal nothing is asked and local mode is said: hidden=%d\n%s", term.hidden, term.out)
	}
}

func TestInitOnATerminalAsksTheKeyHiddenThenConfirmsTheMerge(t *testing.T) {
	p := newProject(t)
	p.write(".mcp.json", otherServers)
	p.write(".gitignore", "node_modules/") // no final newline
	// The merge question first, the key last: a "y" typed for the one
	// never becomes the other.
	term := newFakeTerm(true, strings.NewReader("y\nsk-secret-123456789\n"), nil)
	if err := p.init(initOptions{}, term); err != nil {
		t.Fatalf("%v\n%s", err, term.out)
	}
	if term.hidden != 1 || term.restored != 1 {
		t.Errorf("echo turned off %d times, restored %d times", term.hidden, term.restored)
	}
	if strings.Contains(term.out.String(), "sk-secret-123456789") {
		t.Errorf("the key was printed:\n%s", term.out)
	}
	if !strings.Contains(term.out.String(), "[y/N]") {
		t.Errorf("no confirmation asked:\n%s", term.out)
	}
	env, _ := p.pmlEntry()["env"].(map[string]any)
	if env["PML_API_KEY"] != nil {
		t.Errorf("the key is in the pml entry: %v", env)
	}
	if got := p.credential(); got != "sk-secret-123456789" {
		t.Errorf("the credentials file holds %q", got)
	}
	if got := p.read(".mcp.json.backup"); got != otherServers {
		t.Errorf("backup = %q", got)
	}
	mcp := p.read(".mcp.json")
	if !strings.Contains(mcp, "server-github") || !strings.Contains(mcp, `"x-team-setting"`) {
		t.Errorf("the merge lost something:\n%s", mcp)
	}
	if got := p.read(".gitignore"); !strings.HasPrefix(got, "node_modules/\n") || strings.Contains(got, "\n.mcp.json\n") || strings.Count(got, ".mcp.json.backup\n") != 1 {
		t.Errorf(".gitignore = %q", got)
	}
	for name, content := range p.snapshot() {
		if strings.Contains(content, "sk-secret-123456789") {
			t.Errorf("the key leaked into %s", name)
		}
	}
}

func TestInitChangesNothingWhenItMayNotMerge(t *testing.T) {
	cases := []struct {
		name        string
		interactive bool
		input       string
		opts        initOptions
		mcp         string
		code        int
		want        string
	}{
		{"no terminal and no --yes", false, "", initOptions{}, otherServers, 2, "pml init --yes"},
		{"the person answers no", true, "\nn\n", initOptions{}, otherServers, 1, "nothing was changed"},
		{"the person just presses Enter", true, "\n\n", initOptions{}, otherServers, 1, "nothing was changed"},
		{"invalid JSON", false, "", initOptions{yes: true}, "{\n  \"mcpServers\": {,}\n}\n", 2, "line 2, column 18"},
		{"the pml entry is not an object", false, "", initOptions{yes: true}, `{"mcpServers": {"pml": "x"}}`, 2, `server "pml"`},
		{"--api-key with --local", false, "", initOptions{yes: true, local: true, apiKey: testKey}, otherServers, 2, "contradict"},
		{"a key with a space", false, "", initOptions{yes: true, apiKey: "a b"}, otherServers, 2, "--api-key"},
		{"a bad cloud URL", false, "", initOptions{yes: true, cloudURL: "ftp://x"}, otherServers, 2, "--cloud-url"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newProject(t)
			p.write(".mcp.json", c.mcp)
			p.write(".gitignore", "dist/\n")
			before := p.snapshot()
			term := newFakeTerm(c.interactive, strings.NewReader(c.input), nil)
			err := p.init(c.opts, term)
			if exitCode(err) != c.code || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v (exit %d), want exit %d mentioning %q", err, exitCode(err), c.code, c.want)
			}
			if after := p.snapshot(); !equalMaps(before, after) {
				t.Errorf("files changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

func TestInitIsIdempotent(t *testing.T) {
	p := newProject(t)
	p.write(".gitignore", "/.pml\n")
	if err := p.init(initOptions{apiKey: testKey}, newFakeTerm(false, strings.NewReader(""), nil)); err != nil {
		t.Fatal(err)
	}
	first := p.snapshot()
	// Again, without a terminal and without --yes: nothing to merge, so
	// nothing to confirm, and the key already there is kept.
	term := newFakeTerm(false, strings.NewReader(""), nil)
	if err := p.init(initOptions{}, term); err != nil {
		t.Fatalf("%v\n%s", err, term.out)
	}
	if second := p.snapshot(); !equalMaps(first, second) {
		t.Errorf("a second init changed files:\n%v\n%v", first, second)
	}
	if p.exists(".mcp.json.backup") {
		t.Error("an unchanged .mcp.json was backed up")
	}
	if got := p.read(".gitignore"); strings.Count(got, ".pml") != 2 || strings.Contains(got, "\n.pml/\n") {
		t.Errorf("/.pml already ignores .pml/; .gitignore = %q", got)
	}
	if !strings.Contains(term.out.String(), "the one in "+p.credPath()+" is used") {
		t.Errorf("%s", term.out)
	}
}

func TestInitKeepsAnExistingPMLJSON(t *testing.T) {
	p := newProject(t)
	p.write(".pml.json", `{"permissions": {"allow": ["*"]}}`)
	term := newFakeTerm(false, strings.NewReader(""), nil)
	if err := p.init(initOptions{cloudURL: "http://127.0.0.1:9", cloudURLSet: true}, term); err != nil {
		t.Fatal(err)
	}
	if got := p.read(".pml.json"); got != `{"permissions": {"allow": ["*"]}}` {
		t.Errorf(".pml.json rewritten: %s", got)
	}
	if !strings.Contains(term.out.String(), "--cloud-url was not applied") {
		t.Errorf("%s", term.out)
	}
}

func TestInitPromptWhereEchoCannotBeHidden(t *testing.T) {
	p := newProject(t)
	term := newFakeTerm(true, strings.NewReader("\n"), errors.New("not a tty"))
	if err := p.init(initOptions{}, term); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(term.out.String(), "will be visible") || !strings.Contains(term.out.String(), "local mode") {
		t.Errorf("%s", term.out)
	}
}

func TestInitInterruptedAtThePromptChangesNothing(t *testing.T) {
	p := newProject(t)
	p.write(".mcp.json", otherServers)
	before := p.snapshot()
	r, w := io.Pipe() // nobody ever types
	defer w.Close()
	term := newFakeTerm(true, r, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runInit(ctx, initOptions{cloudURL: config.DefaultCloudURL}, term.terminal, p.env, p.dir, testExe)
	}()
	cancel()
	err := <-done
	if exitCode(err) != 130 {
		t.Fatalf("err = %v, want exit 130", err)
	}
	if after := p.snapshot(); !equalMaps(before, after) {
		t.Errorf("files changed: %v", after)
	}
}

func TestGitignoreAdd(t *testing.T) {
	cases := []struct {
		name, in, out string
		added         []string
	}{
		{"empty", "", "# pml (pml init)\n.pml/\n.pml.json\n", []string{".pml/", ".pml.json"}},
		{"no final newline", "a", "a\n# pml (pml init)\n.pml/\n.pml.json\n", []string{".pml/", ".pml.json"}},
		{"equivalent spellings count", "/.pml\n/.pml.json\n", "/.pml\n/.pml.json\n", nil},
		{"a negation is not an entry", "!.pml.json\n.pml/\n", "!.pml.json\n.pml/\n# pml (pml init)\n.pml.json\n", []string{".pml.json"}},
		{"comments are not entries", "# .pml/\n.pml.json\n", "# .pml/\n.pml.json\n# pml (pml init)\n.pml/\n", []string{".pml/"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, added := gitignoreAdd([]byte(c.in), []string{".pml/", ".pml.json", ".pml/"})
			if string(out) != c.out || strings.Join(added, ",") != strings.Join(c.added, ",") {
				t.Errorf("got %q %v, want %q %v", out, added, c.out, c.added)
			}
		})
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// credPath is the credentials file under the project's XDG_CONFIG_HOME.
func (p *project) credPath() string { return filepath.Join(p.config, "pml", "credentials") }

// credential is the key in the user's credentials file.
func (p *project) credential() string {
	p.t.Helper()
	k, err := credentials.Read(p.credPath())
	if err != nil {
		p.t.Fatal(err)
	}
	return k
}

// A .mcp.json written by an older pml holds the key: init moves it to the
// credentials file, with consent, keeping the other servers and a backup
// only its owner can read.
func TestInitMovesAKeyOutOfMCPJSON(t *testing.T) {
	old := `{
  "mcpServers": {
    "github": {"command": "npx", "args": ["-y", "server-github"]},
    "pml": {"type": "stdio", "command": "/old/pml", "args": ["stdio"], "env": {"PML_WORKSPACE": "/w", "PML_API_KEY": "sk-old-777"}}
  }
}
`
	t.Run("without a terminal and without --yes nothing is written", func(t *testing.T) {
		p := newProject(t)
		p.write(".mcp.json", old)
		before := p.snapshot()
		err := p.init(initOptions{}, newFakeTerm(false, strings.NewReader(""), nil))
		if exitCode(err) != 2 || !strings.Contains(err.Error(), "the API key in it would move to") || !strings.Contains(err.Error(), "Nothing was written") {
			t.Fatalf("err = %v", err)
		}
		if !equalMaps(before, p.snapshot()) || p.credential() != "" {
			t.Error("files changed")
		}
	})
	t.Run("a no on the terminal writes nothing", func(t *testing.T) {
		p := newProject(t)
		p.write(".mcp.json", old)
		term := newFakeTerm(true, strings.NewReader("n\n"), nil)
		if err := p.init(initOptions{}, term); exitCode(err) != 1 {
			t.Fatalf("err = %v", err)
		}
		if !strings.Contains(term.out.String(), "would move to") || p.credential() != "" || p.exists(".mcp.json.backup") {
			t.Errorf("asked %q; a file changed", term.out)
		}
	})
	for _, c := range []struct {
		name string
		term *fakeTerm
		o    initOptions
	}{
		{"--yes moves it", newFakeTerm(false, strings.NewReader(""), nil), initOptions{yes: true}},
		{"a y on the terminal moves it", newFakeTerm(true, strings.NewReader("y\n"), nil), initOptions{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newProject(t)
			if err := os.WriteFile(filepath.Join(p.dir, ".mcp.json"), []byte(old), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := p.init(c.o, c.term); err != nil {
				t.Fatalf("%v\n%s", err, c.term.out)
			}
			if got := p.credential(); got != "sk-old-777" {
				t.Errorf("credentials file holds %q", got)
			}
			mcp := p.read(".mcp.json")
			if strings.Contains(mcp, "sk-old-777") || strings.Contains(mcp, "PML_API_KEY") || !strings.Contains(mcp, "server-github") {
				t.Errorf(".mcp.json:\n%s", mcp)
			}
			if p.read(".mcp.json.backup") != old {
				t.Error("the backup is not the old file")
			}
			if st, _ := os.Stat(filepath.Join(p.dir, ".mcp.json.backup")); st.Mode().Perm() != 0o600 {
				t.Errorf("the backup holds a key with mode %04o", st.Mode().Perm())
			}
			if !strings.Contains(c.term.out.String(), "moved from .mcp.json to") || strings.Contains(c.term.out.String(), "sk-old-777") {
				t.Errorf("summary:\n%s", c.term.out)
			}
		})
	}
}
