//go:build linux

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// pml add npm: with a private npm registry (issue 51 item 6): the
// registry the person configured is where pml checks the package, where
// npm in the install container installs it from, and the install's only
// host through pml's egress proxy.

// fakeMCPServerJS is an MCP server of a few lines (newline-delimited
// JSON-RPC on stdin/stdout) with one tool, echo.
const fakeMCPServerJS = `#!/usr/bin/env node
const rl = require('readline').createInterface({input: process.stdin});
const send = m => process.stdout.write(JSON.stringify(m) + '\n');
rl.on('line', line => {
  let m;
  try { m = JSON.parse(line); } catch (e) { return; }
  if (m.id === undefined) return;
  switch (m.method) {
  case 'initialize':
    return send({jsonrpc: '2.0', id: m.id, result: {protocolVersion: m.params.protocolVersion,
      capabilities: {tools: {}}, serverInfo: {name: 'fake', version: '1.0.0'}}});
  case 'ping':
    return send({jsonrpc: '2.0', id: m.id, result: {}});
  case 'tools/list':
    return send({jsonrpc: '2.0', id: m.id, result: {tools: [{name: 'echo', description: 'Echoes its text',
      inputSchema: {type: 'object', properties: {text: {type: 'string'}}, required: ['text']}}]}});
  case 'tools/call':
    return send({jsonrpc: '2.0', id: m.id, result: {content: [{type: 'text', text: 'echo: ' + m.params.arguments.text}]}});
  default:
    return send({jsonrpc: '2.0', id: m.id, error: {code: -32601, message: 'no such method'}});
  }
});
`

// npmTarball is an npm package tarball of the fake MCP server.
func npmTarball(t *testing.T, name string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, body string }{
		{"package/package.json", fmt.Sprintf(`{"name": %q, "version": "1.0.0", "bin": {"fake": "index.js"}}`, name)},
		{"package/index.js", fakeMCPServerJS},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o755, Size: int64(len(f.body)), ModTime: time.Unix(1e9, 0), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// privateNPM is an npm registry on loopback serving one real package;
// it counts what npm itself (its user agent) fetched from it.
type privateNPM struct {
	*httptest.Server
	mu  sync.Mutex
	npm []string // paths npm asked for
}

// startPrivateNPM starts the registry; with a token, it answers only
// requests that carry it (403 otherwise, as a private registry does).
func startPrivateNPM(t *testing.T, name, token string) *privateNPM {
	t.Helper()
	tarball := npmTarball(t, name)
	p := &privateNPM{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "a token is needed", http.StatusForbidden)
			return
		}
		if strings.HasPrefix(r.UserAgent(), "npm/") {
			p.mu.Lock()
			p.npm = append(p.npm, r.URL.Path)
			p.mu.Unlock()
		}
		switch r.URL.EscapedPath() {
		case "/" + strings.Replace(strings.ReplaceAll(name, "/", "%2F"), "%40", "@", 1), "/" + strings.Replace(name, "/", "%2f", 1), "/" + name:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"name": %q, "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": {"name": %q, "version": "1.0.0",
  "bin": {"fake": "index.js"}, "dist": {"integrity": %q, "tarball": %q}}}}`, name, name, sri512(tarball), "http://"+r.Host+"/fake-1.0.0.tgz")
		case "/fake-1.0.0.tgz":
			_, _ = w.Write(tarball)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(p.Close)
	return p
}

// npmFetched reports whether npm fetched the tarball from the registry.
func (p *privateNPM) npmFetched() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, path := range p.npm {
		if path == "/fake-1.0.0.tgz" {
			return true
		}
	}
	return false
}

// TestAddNPMFromAPrivateRegistry: with NPM_CONFIG_REGISTRY naming a
// registry on loopback, pml add npm: checks the package there, npm in
// the install container installs it from there (the only host pml's
// proxy lets it reach: asking the public registry would be refused, as
// it was before the fix, E403), the server runs, and the registry is
// recorded in the install step, so a later install uses it with nothing
// in the environment. The same with the registry named by the
// workspace's .npmrc, which the approval says is the repository's choice.
func TestAddNPMFromAPrivateRegistry(t *testing.T) {
	needImage(t, nodeImage)
	const pkg = "@pml-test/server-fake"
	t.Run("NPM_CONFIG_REGISTRY", func(t *testing.T) {
		reg := startPrivateNPM(t, pkg, "")
		ws := newWorkspace(t, "")
		env := []string{"PML_WORKSPACE=" + ws.Dir, "npm_config_registry=", "NPM_CONFIG_REGISTRY=" + reg.URL}
		r := runCLI(t, ws.Dir, env, "", "add", "npm:"+pkg, "--yes", "--allow")
		stderr := logText(r.stderr)
		if r.code != 0 {
			t.Fatalf("pml add: exit %d\n%s", r.code, stderr)
		}
		if !strings.Contains(stderr, "from "+reg.URL+" (named by NPM_CONFIG_REGISTRY") || strings.Contains(stderr, "registry.npmjs.org") {
			t.Errorf("the approval does not name the configured registry, or names the public one:\n%s", stderr)
		}
		if !reg.npmFetched() {
			t.Errorf("npm in the install container did not fetch the tarball from the configured registry (it asked for %v)", reg.npm)
		}
		if !strings.Contains(string(r.stdout), "fake:echo") {
			t.Errorf("pml add lists no fake:echo:\n%s", r.stdout)
		}
		if cfg := readFile(t, ws.path(".pml.json")); !strings.Contains(cfg, `"--registry"`) || !strings.Contains(cfg, `"`+reg.URL+`"`) {
			t.Errorf(".pml.json's install step does not record the registry:\n%s", cfg)
		}
		if d := readFile(t, ws.path(".pml/deps.json")); !strings.Contains(d, `"registry": "`+reg.URL+`"`) {
			t.Errorf(".pml/deps.json does not record the registry:\n%s", d)
		}
		call := func(env []string, what string) {
			t.Helper()
			r := runCLI(t, ws.Dir, env, "", "call", "fake:echo", `{"text":"`+what+`"}`)
			if out := callJSON(t, r); r.code != 0 || out.Text != "echo: "+what {
				t.Errorf("pml call fake:echo: exit %d %q\n%s", r.code, out.Text, logText(r.stderr))
			}
		}
		call(env, "private")
		// A later install (its cache gone) uses the recorded registry,
		// with no registry in the environment.
		if err := os.RemoveAll(ws.path(".pml/deps/fake")); err != nil {
			t.Fatal(err)
		}
		reg.mu.Lock()
		reg.npm = nil
		reg.mu.Unlock()
		call([]string{"PML_WORKSPACE=" + ws.Dir, "npm_config_registry=", "NPM_CONFIG_REGISTRY="}, "again")
		if !reg.npmFetched() {
			t.Errorf("the reinstall did not fetch from the recorded registry (npm asked it for %v)", reg.npm)
		}
	})
	t.Run("project .npmrc", func(t *testing.T) {
		reg := startPrivateNPM(t, pkg, "")
		ws := newWorkspace(t, "")
		ws.write(".npmrc", "# the repository's registry\nregistry="+reg.URL+"/\n")
		env := []string{"PML_WORKSPACE=" + ws.Dir, "npm_config_registry=", "NPM_CONFIG_REGISTRY="}
		r := runCLI(t, ws.Dir, env, "", "add", "npm:"+pkg, "--yes")
		stderr := logText(r.stderr)
		if r.code != 0 {
			t.Fatalf("pml add: exit %d\n%s", r.code, stderr)
		}
		if !strings.Contains(stderr, "named by the repository's "+ws.path(".npmrc")) {
			t.Errorf("the approval does not say the repository's .npmrc chose the registry:\n%s", stderr)
		}
		if !reg.npmFetched() {
			t.Errorf("npm in the install container did not fetch the tarball from the .npmrc's registry (it asked for %v)", reg.npm)
		}
		if !strings.Contains(string(r.stdout), "fake:echo") {
			t.Errorf("pml add lists no fake:echo:\n%s", r.stdout)
		}
	})
	t.Run("token in the user npmrc", func(t *testing.T) {
		const token = "s3cret-npm-token"
		reg := startPrivateNPM(t, pkg, token)
		home := t.TempDir()
		u := strings.TrimPrefix(reg.URL, "http:")
		if err := os.WriteFile(home+"/.npmrc", []byte("registry="+reg.URL+"/\n"+u+"/:_authToken="+token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		ws := newWorkspace(t, "")
		env := []string{"PML_WORKSPACE=" + ws.Dir, "HOME=" + home, "npm_config_registry=", "NPM_CONFIG_REGISTRY="}
		r := runCLI(t, ws.Dir, env, "", "add", "npm:"+pkg, "--yes")
		stderr := logText(r.stderr)
		if r.code != 0 {
			t.Fatalf("pml add: exit %d\n%s", r.code, stderr)
		}
		if !reg.npmFetched() {
			t.Errorf("npm in the install container did not fetch the tarball with the token (it asked for %v)", reg.npm)
		}
		for what, text := range map[string]string{"stdout": string(r.stdout), "stderr": string(r.stderr),
			".pml.json": readFile(t, ws.path(".pml.json")), ".pml/deps.json": readFile(t, ws.path(".pml/deps.json"))} {
			if strings.Contains(text, token) {
				t.Errorf("the token is in %s:\n%s", what, text)
			}
		}
	})
}
