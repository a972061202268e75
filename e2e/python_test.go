//go:build linux

package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Python servers (issue 55): a PEP 503 simple index on loopback serving
// wheels the test builds, since no public Python index is reachable from
// these machines. The server is a small real MCP server in plain Python
// (JSON-RPC over stdio, newline-delimited), whose greet tool calls into a
// second wheel it depends on.

const pythonImage = "pml/python:3.11"

// pyServerMain is the MCP server's module: initialize, tools/list,
// tools/call and ping, one JSON message a line.
const pyServerMain = `import json, sys
from pmltest_greet import greet

TOOLS = [{"name": "greet", "description": "Greets someone (from a Python wheel)",
          "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}]

def answer(msg):
    m = msg.get("method")
    p = msg.get("params") or {}
    if m == "initialize":
        return {"protocolVersion": p.get("protocolVersion", "2025-06-18"), "capabilities": {"tools": {}},
                "serverInfo": {"name": "pmltest-pyserver", "version": "1.0.0"}}
    if m == "ping":
        return {}
    if m == "tools/list":
        return {"tools": TOOLS}
    if m == "tools/call" and p.get("name") == "greet":
        return {"content": [{"type": "text", "text": greet(p.get("arguments", {}).get("name", "?"))}]}
    raise KeyError(m)

def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        if "id" not in msg:
            continue
        try:
            out = {"jsonrpc": "2.0", "id": msg["id"], "result": answer(msg)}
        except KeyError:
            out = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "method not found"}}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
`

// wheel builds a pure-Python wheel: files under their paths, METADATA
// with requires, WHEEL, entry_points.txt with scripts, and a RECORD with
// every file's hash, as pip checks it.
func wheel(t testing.TB, name, version string, files map[string]string, requires []string, scripts map[string]string) (string, []byte) {
	t.Helper()
	dist := strings.ReplaceAll(name, "-", "_")
	info := dist + "-" + version + ".dist-info/"
	all := map[string]string{}
	for k, v := range files {
		all[k] = v
	}
	meta := "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
	for _, r := range requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	all[info+"METADATA"] = meta
	all[info+"WHEEL"] = "Wheel-Version: 1.0\nGenerator: pml-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	if len(scripts) > 0 {
		ep := "[console_scripts]\n"
		for k, v := range scripts {
			ep += k + " = " + v + "\n"
		}
		all[info+"entry_points.txt"] = ep
	}
	var record strings.Builder
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	put := func(p, content string) {
		w, err := zw.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(content))
	}
	for p, content := range all {
		sum := sha256.Sum256([]byte(content))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(content))
		put(p, content)
	}
	record.WriteString(info + "RECORD,,\n")
	put(info+"RECORD", record.String())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return dist + "-" + version + "-py3-none-any.whl", buf.Bytes()
}

// pyIndex is a PEP 503 simple index on loopback: /simple/NAME/ lists
// the files of a project with their sha256, /files/FILE serves them.
type pyIndex struct {
	*httptest.Server
	mu       sync.Mutex
	projects map[string][]string // normalized name -> file names
	files    map[string][]byte
	user     string
	password string
	hits     int
}

func newPyIndex(t testing.TB, user, password string) *pyIndex {
	t.Helper()
	ix := &pyIndex{projects: map[string][]string{}, files: map[string][]byte{}, user: user, password: password}
	ix.Server = httptest.NewServer(http.HandlerFunc(ix.serve))
	t.Cleanup(ix.Close)
	return ix
}

func (ix *pyIndex) add(project, file string, b []byte) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	n := strings.ToLower(regexp.MustCompile(`[-_.]+`).ReplaceAllString(project, "-"))
	ix.projects[n] = append(ix.projects[n], file)
	ix.files[file] = b
}

// replace serves other bytes under a file's name, with their own sha256
// in the listing: an index (or whoever controls it) changing a release.
func (ix *pyIndex) replace(file string, b []byte) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.files[file] = b
}

func (ix *pyIndex) serve(w http.ResponseWriter, r *http.Request) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.hits++
	if ix.user != "" {
		if u, p, ok := r.BasicAuth(); !ok || u != ix.user || p != ix.password {
			w.Header().Set("WWW-Authenticate", `Basic realm="pml-e2e"`)
			http.Error(w, "credentials required", http.StatusUnauthorized)
			return
		}
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/simple/"):
		n := strings.Trim(strings.TrimPrefix(r.URL.Path, "/simple/"), "/")
		files, ok := ix.projects[n]
		if !ok {
			http.NotFound(w, r)
			return
		}
		var sb strings.Builder
		sb.WriteString("<!DOCTYPE html><html><body>\n")
		for _, f := range files {
			sum := sha256.Sum256(ix.files[f])
			fmt.Fprintf(&sb, "<a href=\"/files/%s#sha256=%s\">%s</a><br/>\n", f, hex.EncodeToString(sum[:]), f)
		}
		sb.WriteString("</body></html>\n")
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(sb.String()))
	case strings.HasPrefix(r.URL.Path, "/files/"):
		b, ok := ix.files[strings.TrimPrefix(r.URL.Path, "/files/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	default:
		http.NotFound(w, r)
	}
}

// simpleURL is the index's URL as PIP_INDEX_URL takes it.
func (ix *pyIndex) simpleURL() string {
	if ix.user != "" {
		return strings.Replace(ix.URL, "http://", "http://"+ix.user+":"+ix.password+"@", 1) + "/simple/"
	}
	return ix.URL + "/simple/"
}

// greetWheel is the dependency: pmltest_greet.greet(name).
func greetWheel(t testing.TB, greeting string) (string, []byte) {
	return wheel(t, "pmltest-greet", "1.0.0", map[string]string{
		"pmltest_greet/__init__.py": "def greet(name):\n    return \"" + greeting + ", \" + name\n",
	}, nil, nil)
}

// pyServerIndex is an index with the server and its dependency.
func pyServerIndex(t testing.TB, user, password string) (*pyIndex, string) {
	t.Helper()
	needImage(t, pythonImage)
	ix := newPyIndex(t, user, password)
	f, b := wheel(t, "pmltest-pyserver", "1.0.0", map[string]string{"pmltest_pyserver/__init__.py": pyServerMain},
		[]string{"pmltest-greet (>=1.0)"}, map[string]string{"pmltest-pyserver": "pmltest_pyserver:main"})
	ix.add("pmltest-pyserver", f, b)
	gf, gb := greetWheel(t, "hello")
	ix.add("pmltest-greet", gf, gb)
	return ix, gf
}

const pyConfig = `{"permissions": {"allow": ["py:*"]}, "mcps": {"py": {"command": "uvx", "args": ["pmltest-pyserver"]}}}`

// callGreet lists py's tools and calls greet in a new session.
func callGreet(t *testing.T, ws *workspace, env ...string) (string, *mcp.CallToolResult, *session) {
	t.Helper()
	s := startSession(t, ws, env...)
	got, res := s.call(t, "py:greet", map[string]any{"name": "pml"})
	return got, res, s
}

func TestAPythonServerAddedFromAnIndexIsCalled(t *testing.T) {
	ix, _ := pyServerIndex(t, "", "")
	ix.add("pmltest-sdistonly", "pmltest-sdistonly-1.0.0.tar.gz", []byte("not built"))
	ws := newWorkspace(t, "")
	env := "PIP_INDEX_URL=" + ix.simpleURL()
	// Errors a person understands, before anything is written.
	for _, c := range []struct{ spec, want string }{
		{"pypi:pmltest-nosuch", "not found in the Python package index"},
		{"pypi:pmltest-pyserver@9.9.9", "pmltest-pyserver 9.9.9 is not found"},
		{"pypi:pmltest-sdistonly", "compiler"},
	} {
		if code, _, stderr := runPMLEnv(t, ws, []string{env}, "add", c.spec, "--yes"); code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("pml add %s: exit %d, want 2 and %q:\n%s", c.spec, code, c.want, stderr)
		}
	}
	code, stdout, stderr := runPMLEnv(t, ws, []string{env}, "add", "pypi:pmltest-pyserver", "--yes", "--allow", "--name", "py")
	if code != 0 || !strings.Contains(stdout, "greet") {
		t.Fatalf("pml add pypi:pmltest-pyserver: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if cfg := readFile(t, ws.path(".pml.json")); !strings.Contains(cfg, `"uvx"`) || !strings.Contains(cfg, `pmltest-pyserver==1.0.0`) {
		t.Errorf(".pml.json lacks the pinned uvx entry:\n%s", cfg)
	}
	if code, stdout, stderr := runPMLEnv(t, ws, []string{env}, "tools"); code != 0 || !strings.Contains(stdout, "py:greet") {
		t.Errorf("pml tools: exit %d\n%s\n%s", code, stdout, stderr)
	}
	got, res, s := callGreet(t, ws, env)
	if res.IsError || got != "hello, pml" {
		t.Fatalf("py:greet = %q (error %v)\nstderr:\n%s", got, res.IsError, s.stderr.String())
	}
	// A pooled call (the container started by the call above).
	began := time.Now()
	if got, _ := s.call(t, "py:greet", map[string]any{"name": "again"}); got != "hello, again" {
		t.Errorf("the pooled call: %q", got)
	}
	t.Logf("pooled call of the Python server: %s", time.Since(began).Round(100*time.Microsecond))
	if !listsTool(t, s.ClientSession, "py:greet") {
		t.Errorf("py:greet is not listed")
	}
	// The lock: both distributions, each with the sha256 of its wheel.
	lock := readFile(t, ws.path(".pml/deps.json"))
	for _, want := range []string{`"name": "pmltest-pyserver"`, `"name": "pmltest-greet"`, `"sha256": "`, `"version": "1.0.0"`} {
		if !strings.Contains(lock, want) {
			t.Errorf(".pml/deps.json lacks %s:\n%s", want, lock)
		}
	}
	if _, err := os.Stat(ws.path(".pml/deps/py/pml-lock.txt")); err != nil {
		t.Errorf("no lock in the installed tree: %v", err)
	}
	if code, out, errs := runPML(t, ws, "lock"); code != 0 || !strings.Contains(out, "pmltest-greet==1.0.0 sha256:") {
		t.Errorf("pml lock does not list the locked distributions: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := runPML(t, ws, "lock", "--check"); code != 0 {
		t.Errorf("pml lock --check: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := runPMLEnv(t, ws, []string{env}, "call", "py:greet", `{"name": "cli"}`); code != 0 || !strings.Contains(out, `"text":"hello, cli"`) && !strings.Contains(out, `"text": "hello, cli"`) {
		t.Errorf("pml call py:greet: exit %d\n%s\n%s", code, out, errs)
	}
	// The server runs in the Python image, installed.
	if code, out, errs := runPMLEnv(t, ws, []string{env}, "list"); code != 0 || !strings.Contains(out, "image "+pythonImage) || strings.Contains(out, "not installed") {
		t.Errorf("pml list: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestAPythonServerIsRemovedWithItsInstall: pml remove --clean takes the
// entry, its installed tree and its lock.
func TestAPythonServerIsRemovedWithItsInstall(t *testing.T) {
	ix, _ := pyServerIndex(t, "", "")
	ws := newWorkspace(t, "")
	env := "PIP_INDEX_URL=" + ix.simpleURL()
	if code, stdout, stderr := runPMLEnv(t, ws, []string{env}, "add", "pypi:pmltest-pyserver@1.0.0", "--yes"); code != 0 {
		t.Fatalf("pml add: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr := runPMLEnv(t, ws, []string{env}, "remove", "pmltest-pyserver", "--clean", "--yes"); code != 0 {
		t.Fatalf("pml remove --clean: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(ws.path(".pml/deps/pmltest-pyserver")); err == nil {
		t.Errorf(".pml/deps/pmltest-pyserver is still there")
	}
	if b, err := os.ReadFile(ws.path(".pml/deps.json")); err == nil && strings.Contains(string(b), "pmltest-greet") {
		t.Errorf("the lock is still in .pml/deps.json:\n%s", b)
	}
}

// TestAnUnreachableIndexIsNamed: an install whose index does not answer
// says so, with what the connection got, and not "no such package".
func TestAnUnreachableIndexIsNamed(t *testing.T) {
	needImage(t, pythonImage)
	ix := newPyIndex(t, "", "")
	url := ix.simpleURL()
	ix.Close()
	ws := newWorkspace(t, pyConfig)
	s := startSession(t, ws, "PIP_INDEX_URL="+url)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "py:greet", Arguments: map[string]any{"name": "pml"}})
	msg := ""
	if err != nil {
		msg = err.Error()
	} else {
		msg = text(res)
	}
	t.Logf("the refusal: %s", msg)
	if !strings.Contains(msg, "could not be reached") || strings.Contains(msg, "no such package") {
		t.Errorf("an unreachable index: %q\nstderr:\n%s", msg, s.stderr.String())
	}
}

func TestAPythonServerRestartsOfflineFromTheLock(t *testing.T) {
	ix, _ := pyServerIndex(t, "", "")
	ws := newWorkspace(t, pyConfig)
	env := "PIP_INDEX_URL=" + ix.simpleURL()
	if got, _, s := callGreet(t, ws, env); got != "hello, pml" {
		t.Fatalf("first run: py:greet = %q\n%s", got, s.stderr.String())
	} else {
		s.Close()
	}
	ix.Close() // the index is gone: the next process runs from .pml/deps
	got, res, s := callGreet(t, ws, env)
	if res.IsError || got != "hello, pml" {
		t.Fatalf("offline: py:greet = %q\nstderr:\n%s", got, s.stderr.String())
	}
}

func TestATamperedWheelIsRefused(t *testing.T) {
	ix, greetFile := pyServerIndex(t, "", "")
	ws := newWorkspace(t, pyConfig)
	env := "PIP_INDEX_URL=" + ix.simpleURL()
	if got, _, s := callGreet(t, ws, env); got != "hello, pml" {
		t.Fatalf("first run: py:greet = %q\n%s", got, s.stderr.String())
	} else {
		s.Close()
	}
	// The dependency's release is replaced upstream (listing and file
	// agree: only the lock knows), and the install is gone: the next
	// start installs again from the lock.
	_, evil := greetWheel(t, "pwned")
	ix.replace(greetFile, evil)
	if err := os.RemoveAll(ws.path(".pml/deps/py")); err != nil {
		t.Fatal(err)
	}
	s := startSession(t, ws, env)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "py:greet", Arguments: map[string]any{"name": "pml"}})
	msg := ""
	if err != nil {
		msg = err.Error()
	} else {
		msg = text(res)
		if !res.IsError {
			t.Fatalf("a tampered wheel was installed and ran: %q", msg)
		}
	}
	t.Logf("the refusal: %s", msg)
	if strings.Contains(msg, "pwned") || !strings.Contains(msg, "sha256") {
		t.Errorf("the refusal does not name the hash mismatch: %q\nstderr:\n%s", msg, s.stderr.String())
	}
	if _, err := os.Stat(ws.path(".pml/deps/py")); err == nil {
		t.Errorf(".pml/deps/py exists after a refused install")
	}
}

func TestAPrivateIndexIsUsed(t *testing.T) {
	const password = "s3cret-Pw-e2e"
	ix, _ := pyServerIndex(t, "alice", password)
	ws := newWorkspace(t, pyConfig)
	// The index comes from the person's pip.conf (PIP_CONFIG_FILE), with
	// credentials in its URL.
	conf := filepath.Join(t.TempDir(), "pip.conf")
	if err := os.WriteFile(conf, []byte("[global]\nindex-url = "+ix.simpleURL()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, res, s := callGreet(t, ws, "PIP_CONFIG_FILE="+conf, "PIP_INDEX_URL=", "UV_INDEX_URL=")
	if res.IsError || got != "hello, pml" {
		t.Fatalf("py:greet = %q\nstderr:\n%s", got, s.stderr.String())
	}
	s.Close()
	for name, content := range map[string]string{"pml's log": s.stderr.String(), ".pml/deps.json": readFile(t, ws.path(".pml/deps.json"))} {
		if strings.Contains(content, password) {
			t.Errorf("%s holds the index's password:\n%s", name, content)
		}
	}
	if !strings.Contains(readFile(t, ws.path(".pml/deps.json")), "alice") {
		t.Errorf(".pml/deps.json does not name the index it installed from")
	}
}

// A repository committing .pml/deps.json with a Python lock (hashes the
// person never saw) pins nothing: the record is not vouched for here, so
// the server is resolved and locked afresh from the person's index.
func TestARepositoryPythonLockIsNotHonoured(t *testing.T) {
	ix, _ := pyServerIndex(t, "", "")
	env := "PIP_INDEX_URL=" + ix.simpleURL()
	other := newWorkspace(t, pyConfig)
	if got, _, s := callGreet(t, other, env); got != "hello, pml" {
		t.Fatalf("first workspace: py:greet = %q\n%s", got, s.stderr.String())
	} else {
		s.Close()
	}
	forged := regexp.MustCompile(`"sha256": "[0-9a-f]{64}"`).ReplaceAllString(readFile(t, other.path(".pml/deps.json")),
		`"sha256": "`+strings.Repeat("ab", 32)+`"`)
	ws := newWorkspace(t, pyConfig)
	ws.writeUntrusted(".pml/deps.json", forged)
	got, res, s := callGreet(t, ws, env)
	if res.IsError || got != "hello, pml" {
		t.Fatalf("py:greet = %q\nstderr:\n%s", got, s.stderr.String())
	}
	if strings.Contains(readFile(t, ws.path(".pml/deps.json")), strings.Repeat("ab", 32)) {
		t.Errorf("the repository's lock was kept")
	}
}

// TestAUvxEntryIsImportedFromMcpJson: a client's own uvx server in the
// project's .mcp.json becomes a contained server of .pml.json, its env
// values left behind (their names required), and is called.
func TestAUvxEntryIsImportedFromMcpJson(t *testing.T) {
	ix, _ := pyServerIndex(t, "", "")
	ws := newWorkspace(t, "")
	ws.write(".mcp.json", `{"mcpServers": {"py": {"command": "uvx", "args": ["pmltest-pyserver"], "env": {"PY_TOKEN": "not-for-the-repo"}},
  "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}`)
	env := []string{"PIP_INDEX_URL=" + ix.simpleURL(), "PY_TOKEN=from-the-person"}
	if code, _, stderr := runPMLEnv(t, ws, env, "add", "mcp.json:memory", "--yes"); code != 2 || !strings.Contains(stderr, "pml add npm:") {
		t.Errorf("importing an npx entry: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := runPMLEnv(t, ws, env, "add", "mcp.json:py", "--yes", "--allow")
	if code != 0 || !strings.Contains(stdout, "greet") {
		t.Fatalf("pml add mcp.json:py: exit %d\n%s\n%s", code, stdout, stderr)
	}
	cfg := readFile(t, ws.path(".pml.json"))
	if !strings.Contains(cfg, `"uvx"`) || !strings.Contains(cfg, `"PY_TOKEN"`) || strings.Contains(cfg, "not-for-the-repo") {
		t.Errorf(".pml.json:\n%s", cfg)
	}
	got, res, s := callGreet(t, ws, env...)
	if res.IsError || got != "hello, pml" {
		t.Fatalf("py:greet = %q\nstderr:\n%s", got, s.stderr.String())
	}
}

// TestAPythonInstallIsApprovedShowingWhatItTakes: a Python server's first
// start is an approval naming its image, its install and the index it
// reaches; approved, it installs and answers.
func TestAPythonInstallIsApprovedShowingWhatItTakes(t *testing.T) {
	ix, _ := pyServerIndex(t, "", "")
	ws := newWorkspace(t, `{"mcps": {"py": {"command": "uvx", "args": ["pmltest-pyserver"]}}}`)
	s := startSession(t, ws, "PIP_INDEX_URL="+ix.simpleURL())
	a := askFor2(t, s, "py:greet", map[string]any{"name": "pml"}, "dependency")
	host := strings.TrimPrefix(ix.URL, "http://")
	for _, want := range []string{"pip install pmltest-pyserver", pythonImage, host} {
		if !strings.Contains(a.Description, want) {
			t.Errorf("the approval does not show %q: %q", want, a.Description)
		}
	}
	out, res := s.call(t, "pml:continue_workflow", cont(a.WorkflowID, true, false))
	if res.IsError || !strings.Contains(out, "hello, pml") {
		t.Fatalf("approved install + call: %q", out)
	}
}

// TestAPythonServerIsBundledForAnOfflineHost: pml images save carries
// the Python image and the installed, locked tree.
func TestAPythonServerIsBundledForAnOfflineHost(t *testing.T) {
	ix, _ := pyServerIndex(t, "", "")
	ws := newWorkspace(t, pyConfig)
	if got, _, s := callGreet(t, ws, "PIP_INDEX_URL="+ix.simpleURL()); got != "hello, pml" {
		t.Fatalf("py:greet = %q\n%s", got, s.stderr.String())
	} else {
		s.Close()
	}
	bundle := filepath.Join(t.TempDir(), "project.tar.zst")
	stdout, stderr, code := runImagesCmd(t, ws, "images", "save", "-o", bundle)
	if code != 0 {
		t.Fatalf("save: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"saved " + pythonImage, ".pml/deps/py", ".pml/deps.json"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("save does not say %q:\n%s", want, stdout)
		}
	}
}
