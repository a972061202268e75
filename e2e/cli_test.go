//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The commands people type: pml init, pml call, pml doctor, completion.
// They run the built binary with no terminal (stdin is /dev/null unless a
// test gives one), as CI and scripts do.

type cliResult struct {
	stdout, stderr []byte
	code           int
}

// cliEnv is the test process's environment without the variables that
// would choose the workspace or turn the cloud on behind a test's back;
// extra comes last and so wins (exec keeps the last value of a key).
func cliEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PML_WORKSPACE=") || strings.HasPrefix(kv, "PML_API_KEY=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// runCLI runs pml in dir (the workspace is found from there, as when a
// person types the command) and waits for it.
func runCLI(t *testing.T, dir string, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(pmlBin, args...)
	cmd.Dir = dir
	cmd.Env = cliEnv(env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running pml %v: %v", args, err)
	}
	return cliResult{out.Bytes(), errb.Bytes(), code}
}

// realPML is PML_BIN as init must write it: absolute, symlinks resolved.
func realPML(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs(pmlBin)
	if err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// snapshotFiles maps every file under dir to its bytes.
func snapshotFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[strings.TrimPrefix(p, dir)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type mcpDoc struct {
	MCPServers map[string]struct {
		Type    string            `json:"type"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
	} `json:"mcpServers"`
}

func readMCP(t *testing.T, ws *workspace) mcpDoc {
	t.Helper()
	var d mcpDoc
	b, err := os.ReadFile(ws.path(".mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf(".mcp.json: %v\n%s", err, b)
	}
	return d
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestInitEmptyProject(t *testing.T) {
	ws := newWorkspace(t, "")
	r := runCLI(t, ws.Dir, nil, "", "init")
	if r.code != 0 || len(r.stdout) != 0 {
		t.Fatalf("exit %d, stdout %q\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	d := readMCP(t, ws)
	pml, ok := d.MCPServers["pml"]
	if !ok {
		t.Fatalf("no pml server in .mcp.json: %+v", d)
	}
	// This pml is not on the test's PATH: its absolute path, and no
	// workspace (pml finds it from where the client starts it).
	if !filepath.IsAbs(pml.Command) || pml.Command != realPML(t) || pml.Type != "stdio" ||
		!reflect.DeepEqual(pml.Args, []string{"stdio"}) || len(pml.Env) != 0 {
		t.Errorf("pml server = %+v, want command %s, args [stdio], no env", pml, realPML(t))
	}
	if !strings.Contains(logText(r.stderr), "the pml on PATH is not this one") {
		t.Errorf("init does not say why it wrote an absolute path:\n%s", r.stderr)
	}
	var cfg struct {
		Permissions struct{ Allow, Ask, Deny []string } `json:"permissions"`
		Cloud       struct{ URL string }                `json:"cloud"`
	}
	if err := json.Unmarshal([]byte(readFile(t, ws.path(".pml.json"))), &cfg); err != nil {
		t.Fatal(err)
	}
	// Read tools allowed by name; write tools and shell:exec not allowed
	// (so asked, checked by calling them below).
	p := cfg.Permissions
	if !inList(p.Allow, "filesystem:read_file") || !inList(p.Allow, "filesystem:list_directory") || inList(p.Allow, "filesystem:write_file") ||
		inList(p.Allow, "shell:exec") || len(p.Deny) != 0 || cfg.Cloud.URL == "" {
		t.Errorf(".pml.json = %+v", cfg)
	}
	ignore := readFile(t, ws.path(".gitignore"))
	// .pml.json is the team's policy, committed; the personal file is not.
	if lineCount(ignore, ".pml/") != 1 || lineCount(ignore, ".pml.local.json") != 1 || lineCount(ignore, ".pml.json") != 0 {
		t.Errorf(".gitignore = %q", ignore)
	}
	for _, want := range []string{"created", "local mode"} {
		if !strings.Contains(logText(r.stderr), want) {
			t.Errorf("the summary does not say %q:\n%s", want, r.stderr)
		}
	}

	t.Run("a second init changes nothing and needs no --yes", func(t *testing.T) {
		before := snapshotFiles(t, ws.Dir)
		r := runCLI(t, ws.Dir, nil, "", "init")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		if after := snapshotFiles(t, ws.Dir); !reflect.DeepEqual(before, after) {
			t.Errorf("files changed:\n%v\n%v", before, after)
		}
		if ignore := readFile(t, ws.path(".gitignore")); lineCount(ignore, ".pml/") != 1 || lineCount(ignore, ".pml.local.json") != 1 || lineCount(ignore, ".pml.json") != 0 {
			t.Errorf(".gitignore = %q", ignore)
		}
		if _, err := os.Stat(ws.path(".mcp.json.backup")); err == nil {
			t.Error("an unchanged .mcp.json was backed up")
		}
	})
	t.Run("the .pml.json it wrote lets read tools run and asks for the others", func(t *testing.T) {
		ws.write("hello.txt", "hello from init")
		r := runCLI(t, ws.Dir, nil, "", "call", "filesystem:read_file", `{"path": "hello.txt"}`)
		out := callJSON(t, r)
		if r.code != 0 || out.Text != "hello from init" {
			t.Errorf("read_file: exit %d %+v\n%s", r.code, out, r.stderr)
		}
		for _, c := range []struct{ tool, args string }{
			{"shell:exec", `{"command": "touch ran"}`},
			{"filesystem:write_file", `{"path": "ran", "content": "x"}`},
		} {
			r = runCLI(t, ws.Dir, nil, "", "call", c.tool, c.args)
			if out := callJSON(t, r); r.code != 3 || out.Outcome != "approval_required" {
				t.Errorf("%s: exit %d %+v", c.tool, r.code, out)
			}
		}
		if _, err := os.Stat(ws.path("ran")); err == nil {
			t.Error("a call that needs approval ran")
		}
	})
}

const otherMCP = `{
  "mcpServers": {
    "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}},
    "remote": {"type": "http", "url": "http://127.0.0.1:1/mcp"}
  },
  "x-unknown": {"nested": [1, 2.50, true]}
}
`

func TestInitWithAnExistingMCPJSON(t *testing.T) {
	t.Run("--yes merges, keeps the other servers and unknown keys, and backs up", func(t *testing.T) {
		ws := newWorkspace(t, "")
		ws.write(".mcp.json", otherMCP)
		ws.write(".gitignore", "node_modules/\n")
		r := runCLI(t, ws.Dir, nil, "", "init", "--yes")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		if got := readFile(t, ws.path(".mcp.json.backup")); got != otherMCP {
			t.Errorf("backup differs from the old file:\n%s", got)
		}
		d := readMCP(t, ws)
		if len(d.MCPServers) != 3 || d.MCPServers["github"].Env["GITHUB_TOKEN"] != "${GITHUB_TOKEN}" || d.MCPServers["pml"].Command != realPML(t) {
			t.Errorf("merged servers: %+v", d.MCPServers)
		}
		var raw map[string]any
		_ = json.Unmarshal([]byte(readFile(t, ws.path(".mcp.json"))), &raw)
		if !reflect.DeepEqual(raw["x-unknown"], map[string]any{"nested": []any{1.0, 2.5, true}}) {
			t.Errorf("the unknown key was not kept: %v", raw["x-unknown"])
		}
		if ignore := readFile(t, ws.path(".gitignore")); !strings.HasPrefix(ignore, "node_modules/\n") || lineCount(ignore, ".pml/") != 1 || lineCount(ignore, ".mcp.json.backup") != 1 {
			t.Errorf(".gitignore = %q", ignore)
		}
	})
	t.Run("without --yes and without a terminal nothing is written", func(t *testing.T) {
		ws := newWorkspace(t, "")
		ws.write(".mcp.json", otherMCP)
		before := snapshotFiles(t, ws.Dir)
		r := runCLI(t, ws.Dir, nil, "", "init")
		if r.code != 2 || !strings.Contains(logText(r.stderr), "--yes") || !strings.Contains(logText(r.stderr), "Nothing was written") {
			t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
		if after := snapshotFiles(t, ws.Dir); !reflect.DeepEqual(before, after) {
			t.Errorf("files changed:\nbefore %v\nafter  %v", before, after)
		}
	})
	t.Run("an invalid .mcp.json is an error naming the file and position", func(t *testing.T) {
		ws := newWorkspace(t, "")
		ws.write(".mcp.json", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}\n")
		before := snapshotFiles(t, ws.Dir)
		r := runCLI(t, ws.Dir, nil, "", "init", "--yes")
		if r.code != 2 || !strings.Contains(logText(r.stderr), ws.path(".mcp.json")) || !strings.Contains(logText(r.stderr), "line 3, column 26") {
			t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
		if after := snapshotFiles(t, ws.Dir); !reflect.DeepEqual(before, after) {
			t.Errorf("files changed:\n%v", after)
		}
	})
}

// callOut is pml call's stdout.
type callOut struct {
	Tool       string          `json:"tool"`
	Outcome    string          `json:"outcome"`
	ExitCode   int             `json:"exit_code"`
	IsError    bool            `json:"is_error"`
	Text       string          `json:"text"`
	Structured json.RawMessage `json:"structured"`
}

// callJSON checks that stdout is exactly one JSON object and a newline, and
// that it agrees with the exit code.
func callJSON(t *testing.T, r cliResult) callOut {
	t.Helper()
	if bytes.Count(r.stdout, []byte("\n")) != 1 || !bytes.HasSuffix(r.stdout, []byte("\n")) {
		t.Fatalf("stdout is not one line:\n%q\nstderr:\n%s", r.stdout, r.stderr)
	}
	var out callOut
	dec := json.NewDecoder(bytes.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("stdout is not the JSON result: %v\n%q", err, r.stdout)
	}
	if rest, _ := io.ReadAll(dec.Buffered()); strings.TrimSpace(string(rest)) != "" {
		t.Fatalf("stdout holds more than the JSON result: %q", r.stdout)
	}
	if out.ExitCode != r.code {
		t.Errorf("exit_code %d in the JSON, the process exited %d", out.ExitCode, r.code)
	}
	return out
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func TestCallExitCodes(t *testing.T) {
	cloud := "http://127.0.0.1:" + strconv.Itoa(closedPort(t))
	// A registry that has nothing: an unknown tool is then "no such tool".
	registry := httptest.NewServer(http.NotFoundHandler())
	defer registry.Close()
	ws := newWorkspace(t, `{
  "permissions": {
    "allow": ["filesystem:read_file", "json:*", "nope:*"],
    "ask": ["filesystem:write_file"],
    "deny": ["filesystem:move_file"]
  },
  "cloud": {"url": "`+cloud+`", "timeout": "5s"},
  "registries": ["`+registry.URL+`"]
}
`)
	offline := newWorkspace(t, `{"permissions": {"allow": ["nope:*"]}, "cloud": {"url": "`+cloud+`"}, "registries": ["`+cloud+`"]}`)
	ws.write("hello.txt", "hello, CI")
	bad := newWorkspace(t, "{\n  \"permissions\": {\"allow\": \"filesystem:*\"}\n}\n")

	cases := []struct {
		name    string
		dir     string
		env     []string
		stdin   string
		args    []string
		code    int
		outcome string
		stdout  string // in the text
		stderr  string
	}{
		{"success", ws.Dir, nil, "", []string{"filesystem:read_file", `{"path": "hello.txt"}`}, 0, "ok", "hello, CI", ""},
		{"ARGS from stdin", ws.Dir, nil, `{"path": "hello.txt"}`, []string{"filesystem:read_file", "-"}, 0, "ok", "hello, CI", ""},
		{"tool error", ws.Dir, nil, "", []string{"filesystem:read_file", `{"path": "missing.txt"}`}, 1, "tool_error", "missing.txt", "tool_error"},
		{"ARGS not JSON", ws.Dir, nil, "", []string{"filesystem:read_file", `{"path": `}, 2, "usage_error", "must be a JSON object", "must be a JSON object"},
		{"ARGS not an object", ws.Dir, nil, "", []string{"filesystem:read_file", `["hello.txt"]`}, 2, "usage_error", "not a list", ""},
		{"unknown flag", ws.Dir, nil, "", []string{"filesystem:read_file", "--bogus"}, 2, "usage_error", "unknown flag", "unknown flag"},
		{"unknown tool", ws.Dir, nil, "", []string{"nope:tool", `{}`}, 2, "usage_error", "nope:tool", "usage_error"},
		{"unknown tool, unreachable registry", offline.Dir, nil, "", []string{"nope:tool", `{}`}, 5, "unavailable", "no registry could be reached", "unavailable"},
		{"invalid .pml.json", bad.Dir, nil, "", []string{"filesystem:read_file", `{"path": "x"}`}, 2, "usage_error", "permissions.allow", ".pml.json"},
		{"needs approval (no pattern)", ws.Dir, nil, "", []string{"filesystem:create_directory", `{"path": "made"}`}, 3, "approval_required", "Approval required",
			`jq '.permissions.allow += ["filesystem:create_directory"]' .pml.json`},
		{"needs approval (listed in ask)", ws.Dir, nil, "", []string{"filesystem:write_file", `{"path": "w.txt", "content": "x"}`}, 3, "approval_required", "Approval required",
			`.permissions.ask -= ["filesystem:write_file"] | .permissions.allow += ["filesystem:write_file"]`},
		{"denied", ws.Dir, nil, "", []string{"filesystem:move_file", `{"source": "hello.txt", "destination": "moved.txt"}`}, 4, "denied", "filesystem:move_file", "denied"},
		{"Docker unavailable", ws.Dir, []string{"DOCKER_HOST=unix:///nonexistent.sock"}, "", []string{"filesystem:read_file", `{"path": "hello.txt"}`}, 5, "unavailable", "Docker", "unavailable"},
		{"cloud unavailable", ws.Dir, []string{"PML_API_KEY=pml-call-e2e-key"}, "", []string{"json:parse", `{"text": "{}"}`}, 6, "cloud_unavailable", "json:parse", "cloud_unavailable"},
		{"local mode", ws.Dir, nil, "", []string{"json:parse", `{"text": "{}"}`}, 6, "cloud_unavailable", "PML_API_KEY", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, c.dir, append([]string{"PML_LOG_LEVEL=debug"}, c.env...), c.stdin, append([]string{"call"}, c.args...)...)
			out := callJSON(t, r)
			if r.code != c.code || out.Outcome != c.outcome || !strings.Contains(out.Text, c.stdout) || !strings.Contains(logText(r.stderr), c.stderr) {
				t.Errorf("exit %d outcome %q, want %d %q with %q in the text and %q on stderr\nstdout: %s\nstderr:\n%s", r.code, out.Outcome, c.code, c.outcome, c.stdout, c.stderr, r.stdout, r.stderr)
			}
			if bytes.Contains(r.stderr, []byte("pml-call-e2e-key")) {
				t.Error("the API key is in the log")
			}
		})
	}
	for _, f := range []string{"made", "w.txt", "moved.txt"} {
		if _, err := os.Stat(ws.path(f)); err == nil {
			t.Errorf("%s exists: a call that needed approval or was denied ran", f)
		}
	}
}

// TestCallWithTheEngineDownSaysItOnce: pml call with an engine that does
// not answer prints its error once, with the fix, and no warning before it
// (the reap of leftovers warned that it could not look, in JSON, first).
func TestCallWithTheEngineDownSaysItOnce(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:read_file"]}}`)
	ws.write("hello.txt", "hello")
	r := runCLI(t, ws.Dir, []string{"DOCKER_HOST=unix:///nonexistent.sock"}, "", "call", "filesystem:read_file", `{"path": "hello.txt"}`)
	// One line: main's error event (stderr is not a terminal: JSON).
	stderr, code, ok := errorEvent(r.stderr)
	if r.code != 5 || !ok || code != 5 || strings.Count(string(r.stderr), "\n") != 1 || strings.Count(stderr, "does not answer") != 1 || !strings.Contains(stderr, "start it") {
		t.Errorf("exit %d, want 5 and one line on stderr saying the engine does not answer and what to do:\n%s", r.code, stderr)
	}
}

func TestCallTimeoutAndInterruptRemoveTheContainer(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["shell:exec"]}}`)
	t.Run("--timeout", func(t *testing.T) {
		began := time.Now()
		r := runCLI(t, ws.Dir, nil, "", "call", "shell:exec", `{"command": "sleep 30"}`, "--timeout", "1s")
		took := time.Since(began)
		out := callJSON(t, r)
		if r.code != 124 || out.Outcome != "timeout" || !out.IsError {
			t.Errorf("exit %d %+v\n%s", r.code, out, r.stderr)
		}
		// It ends at its timeout, not with its command (30 s): a bound
		// well under that, with room for pml's own start and the
		// engine's kill on a loaded host (2.5 s at load 15 on CI's
		// fresh machine).
		if took > 6*time.Second {
			t.Errorf("pml call --timeout 1s took %v", took.Round(time.Millisecond))
		}
		// pml has exited: its container is gone, unless the engine did
		// not confirm its removal within pml's bound (a loaded machine),
		// and then the message names it and the next start removes it.
		for _, c := range containersOf(t, ws.Dir) {
			if !strings.Contains(out.Text, "container "+c.ID[:12]+" may still be running") {
				t.Errorf("container %.12s (%s) left after pml call exited, and its message does not name it: %q", c.ID, c.Labels["pml.purpose"], out.Text)
			}
		}
		if strings.Contains(out.Text, "may still be running") {
			if r := runCLI(t, ws.Dir, nil, "", "call", "shell:exec", `{"command": "true"}`); r.code != 0 {
				t.Fatalf("the next call: exit %d\n%s", r.code, r.stderr)
			}
			waitFor(t, "the next pml start to remove what was left", 15*time.Second, func() bool { return len(containersOf(t, ws.Dir)) == 0 })
		}
	})
	t.Run("Ctrl-C", func(t *testing.T) {
		cmd := exec.Command(pmlBin, "call", "shell:exec", `{"command": "sleep 30"}`)
		cmd.Dir = ws.Dir
		cmd.Env = cliEnv()
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// A pooled container may be up before the call; wait for the
		// call's own command to run in one.
		waitFor(t, "sleep 30 running in the call's container", 60*time.Second, func() bool { return runningIn(t, ws.Dir, "sleep 30") })
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		res := callJSON(t, cliResult{out.Bytes(), errb.Bytes(), code})
		if code != 130 || res.Outcome != "interrupted" {
			t.Errorf("exit %d %+v\n%s", code, res, errb.String())
		}
		if left := containersOf(t, ws.Dir); len(left) != 0 {
			t.Errorf("%d container(s) left after pml call exited", len(left))
		}
	})
}

// runningIn reports whether a process whose command line contains cmd
// runs in one of the workspace's containers.
func runningIn(t *testing.T, dir, cmd string) bool {
	for _, c := range containersOf(t, dir) {
		procs, err := commandLines(t, c.ID)
		if err != nil {
			continue // not running (yet, or any more)
		}
		for _, p := range procs {
			if strings.Contains(p, cmd) {
				return true
			}
		}
	}
	return false
}

func TestCompletion(t *testing.T) {
	ws := newWorkspace(t, "")
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			r := runCLI(t, ws.Dir, nil, "", "completion", shell)
			if r.code != 0 || len(r.stdout) < 200 || !bytes.Contains(r.stdout, []byte("pml")) || !bytes.Contains(r.stdout, []byte("__complete")) {
				t.Errorf("exit %d, %d bytes:\n%.300s\n%s", r.code, len(r.stdout), r.stdout, r.stderr)
			}
		})
	}
	t.Run("pml call completes tool names", func(t *testing.T) {
		r := runCLI(t, ws.Dir, nil, "", "__complete", "call", "filesystem:read")
		lines := strings.Split(strings.TrimSpace(string(r.stdout)), "\n")
		if r.code != 0 || !inList(lines, "filesystem:read_file") || !inList(lines, "filesystem:read_multiple_files") || inList(lines, "shell:exec") {
			t.Errorf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
		}
	})
	// A server never started here has no tool names yet: its name
	// completes, with no space after, and nothing is started to do it.
	t.Run("pml call completes server names", func(t *testing.T) {
		ws := newWorkspace(t, `{"mcps": {"everything": {"image": "pml/node:18", "command": "node"}}}`)
		r := runCLI(t, ws.Dir, nil, "", "__complete", "call", "every")
		lines := strings.Split(strings.TrimSpace(string(r.stdout)), "\n")
		if r.code != 0 || !inList(lines, "everything:") || !strings.Contains(string(r.stdout), ":6\n") {
			t.Errorf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
		}
	})
}

// pmlOnPath is an environment whose PATH finds this pml as "pml" first.
func pmlOnPath(t *testing.T) []string {
	t.Helper()
	bin := t.TempDir()
	if err := os.Symlink(realPML(t), filepath.Join(bin, "pml")); err != nil {
		t.Fatal(err)
	}
	return []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
}

func TestDoctorChecksTheProject(t *testing.T) {
	ws := newWorkspace(t, "")
	onPath := pmlOnPath(t)
	r := runCLI(t, ws.Dir, onPath, "", "doctor")
	if r.code != 0 || !hasCheck(r.stdout, "[warn] clients") || !bytes.Contains(r.stdout, []byte("no MCP client file names pml")) || !bytes.Contains(r.stdout, []byte("local mode")) {
		t.Fatalf("without a client file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, ws.Dir, onPath, "", "init"); r.code != 0 {
		t.Fatalf("init: %s", r.stderr)
	}
	if d := readMCP(t, ws); d.MCPServers["pml"].Command != "pml" {
		t.Fatalf("with this pml on PATH, init wrote %+v", d.MCPServers["pml"])
	}
	r = runCLI(t, ws.Dir, onPath, "", "doctor")
	if r.code != 0 || !hasCheck(r.stdout, "[ok  ] .mcp.json") || !bytes.Contains(r.stdout, []byte("starts this pml (pml stdio)")) {
		t.Fatalf("after init: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Without it on PATH, the same file starts no pml: doctor says so.
	r = runCLI(t, ws.Dir, []string{"PATH=/usr/bin:/bin"}, "", "doctor")
	if !hasCheck(r.stdout, "[warn] .mcp.json") || !bytes.Contains(r.stdout, []byte(`runs "pml", which is not on PATH`)) {
		t.Fatalf("pml not on PATH: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	t.Run("a client file that pins another workspace warns", func(t *testing.T) {
		ws := newWorkspace(t, "")
		ws.write(".gemini/settings.json", `{"mcpServers": {"pml": {"command": "pml", "args": ["stdio"], "env": {"PML_WORKSPACE": "/srv/elsewhere"}}}}`)
		r := runCLI(t, ws.Dir, onPath, "", "doctor")
		if !hasCheck(r.stdout, "[warn] gemini-cli") || !bytes.Contains(r.stdout, []byte("pins PML_WORKSPACE=/srv/elsewhere")) || hasCheck(r.stdout, "[warn] clients") {
			t.Errorf("exit %d\n%s", r.code, r.stdout)
		}
	})

	t.Run("a .mcp.json naming another pml warns", func(t *testing.T) {
		ws := newWorkspace(t, "")
		ws.write(".mcp.json", `{"mcpServers": {"pml": {"command": "/usr/local/bin/some-other-pml", "args": ["stdio"]}}}`)
		r := runCLI(t, ws.Dir, nil, "", "doctor")
		if r.code != 0 || !hasCheck(r.stdout, "[warn] .mcp.json") || !bytes.Contains(r.stdout, []byte("some-other-pml")) {
			t.Errorf("exit %d\n%s", r.code, r.stdout)
		}
	})
	t.Run("a corrupt lockfile fails", func(t *testing.T) {
		ws := newWorkspace(t, "")
		ws.write(".pml/mcp.lock", `{"version": 1, "entries": {"not a name": {}}}`)
		before := readFile(t, ws.path(".pml/mcp.lock"))
		r := runCLI(t, ws.Dir, nil, "", "doctor")
		if r.code == 0 || !hasCheck(r.stdout, "[FAIL] lockfile") || !bytes.Contains(r.stdout, []byte(ws.path(".pml/mcp.lock"))) {
			t.Errorf("exit %d\n%s", r.code, r.stdout)
		}
		if readFile(t, ws.path(".pml/mcp.lock")) != before {
			t.Error("doctor changed the lockfile")
		}
	})
	t.Run("the cloud check", func(t *testing.T) {
		var hits atomic.Int32
		var status atomic.Int32
		status.Store(200)
		var gotKey atomic.Value
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			gotKey.Store(r.Header.Get("x-api-key"))
			if r.URL.Path != "/routing" {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(int(status.Load()))
			_, _ = w.Write([]byte(`{"version":"doctor","server":[],"client":[],"default":"client"}`))
		}))
		defer srv.Close()
		ws := newWorkspace(t, `{"cloud": {"url": "`+srv.URL+`"}}`)

		r := runCLI(t, ws.Dir, nil, "", "doctor")
		if !hasCheck(r.stdout, "[ok  ] cloud") || !bytes.Contains(r.stdout, []byte("local mode")) || hits.Load() != 0 {
			t.Errorf("local mode: %d requests\n%s", hits.Load(), r.stdout)
		}
		r = runCLI(t, ws.Dir, []string{"PML_API_KEY=doctor-e2e-key"}, "", "doctor")
		if !hasCheck(r.stdout, "[ok  ] cloud") || hits.Load() != 1 || gotKey.Load() != "doctor-e2e-key" || bytes.Contains(r.stdout, []byte("doctor-e2e-key")) {
			t.Errorf("reachable: %d requests\n%s", hits.Load(), r.stdout)
		}
		status.Store(401)
		r = runCLI(t, ws.Dir, []string{"PML_API_KEY=doctor-e2e-key"}, "", "doctor")
		if r.code == 0 || !hasCheck(r.stdout, "[FAIL] cloud") || !bytes.Contains(r.stdout, []byte("refused the API key")) {
			t.Errorf("refused key: exit %d\n%s", r.code, r.stdout)
		}
		closed := newWorkspace(t, `{"cloud": {"url": "http://127.0.0.1:`+strconv.Itoa(closedPort(t))+`"}}`)
		r = runCLI(t, closed.Dir, []string{"PML_API_KEY=doctor-e2e-key"}, "", "doctor")
		if !hasCheck(r.stdout, "[warn] cloud") || !bytes.Contains(r.stdout, []byte("not reachable")) {
			t.Errorf("unreachable: exit %d\n%s", r.code, r.stdout)
		}
	})
}

// hasCheck reports whether a line of doctor's output starts with prefix,
// such as "[ok  ] cloud" (the padding between columns does not count).
func hasCheck(out []byte, prefix string) bool {
	want := strings.Join(strings.Fields(prefix), " ")
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.Join(strings.Fields(l), " "), want) {
			return true
		}
	}
	return false
}

func inList(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func lineCount(content, line string) int {
	n := 0
	for _, l := range strings.Split(content, "\n") {
		if strings.TrimSpace(l) == line {
			n++
		}
	}
	return n
}
