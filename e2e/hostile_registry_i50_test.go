//go:build linux

package e2e

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestHostileRegistryCodeURLCannotReachAnotherLocalPort (issue 50,
// finding 8): a registry on one loopback port serves a deno entry whose
// codeUrl is plain http to another loopback port, where another local
// service keeps a secret. pml add refuses it, saying why, without one
// request to that service, and stores nothing: no lockfile entry, no
// capability record, no cached copy, the secret nowhere in the workspace.
// Before, pml fetched the secret and stored it as the entry's code.
func TestHostileRegistryCodeURLCannotReachAnotherLocalPort(t *testing.T) {
	t.Parallel()
	const secret = "TOPSECRET-issue50-finding8"
	var hits atomic.Int32
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		// Valid TypeScript, so nothing else stops the add.
		fmt.Fprintf(w, "export function secret() { return %q; }\n", secret)
	}))
	defer local.Close()
	dir := t.TempDir()
	writeEntry(t, dir, "casys.pml.evil.server.json", fmt.Sprintf(`{"type": "deno", "routing": "client", "codeUrl": %q}`, local.URL+"/admin/secret"))
	writeEntry(t, dir, "casys.pml.sneaky.server.json", fmt.Sprintf(`{"type": "deno", "code_url": %q}`, "//"+strings.TrimPrefix(local.URL, "http://")+"/admin/secret"))
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))

	for _, name := range []string{"casys.pml.evil", "casys.pml.sneaky"} {
		code, _, stderr := runPML(t, ws, "add", name, "--yes")
		if code == 0 || !strings.Contains(stderr, "not the registry's own") || !strings.Contains(stderr, reg.URL) {
			t.Errorf("pml add %s (codeUrl on another loopback port): exit %d, want a refusal that says why\n%s", name, code, stderr)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the other local service was asked %d times", n)
	}
	if b, err := os.ReadFile(ws.path(".pml/mcp.lock")); err == nil && (strings.Contains(string(b), "evil") || strings.Contains(string(b), "sneaky")) {
		t.Errorf("the refused entries are in the lockfile:\n%s", b)
	}
	if b, err := os.ReadFile(ws.path(".pml/capabilities.json")); err == nil && (strings.Contains(string(b), "evil") || strings.Contains(string(b), "sneaky")) {
		t.Errorf("the refused entries are recorded as capabilities:\n%s", b)
	}
	// The cache keeps code base64-encoded: a record of either name is
	// the finding, whatever it holds.
	_ = filepath.WalkDir(ws.Dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, "registry-cache") && (strings.Contains(d.Name(), "evil") || strings.Contains(d.Name(), "sneaky")) {
			t.Errorf("a refused entry is cached: %s", p)
		}
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), secret) {
				t.Errorf("%s holds the other service's answer:\n%s", p, b)
			}
		}
		return nil
	})
}

// TestRegistriesRefuseUserInfo (issue 50): a registry URL written with a
// user name and password is refused, in .pml.json (pml trust) and in
// PML_REGISTRIES (pml doctor), by a message that names the item and what
// to write instead and never shows the password: pml sends no credentials
// to a registry, and the URL is shown wherever the registry is named.
func TestRegistriesRefuseUserInfo(t *testing.T) {
	t.Parallel()
	const pw = "s3cret-pw-50"
	for _, u := range []string{"https://user:" + pw + "@registry.example.org", "http://user:" + pw + "@127.0.0.1:3004", "http://localhost:1@registry.example.com"} {
		ws := newWorkspace(t, "")
		ws.writeUntrusted(".pml.json", `{"permissions": {"allow": ["x:*"]}, "registries": ["https://registry.example.net", "`+u+`"]}`)
		out, code := trustWith(t, ws, t.TempDir(), "--yes")
		out = logText(out)
		if code == 0 || !strings.Contains(out, `"registries[1]"`) || !strings.Contains(out, "user name or password") || strings.Contains(out, pw) {
			t.Errorf("pml trust --yes of a policy with registry %s: exit %d, want it refused for its user info, the password not shown\n%s", u, code, out)
		}
	}
	ws := newWorkspace(t, "")
	cmd := exec.Command(pmlBin, "doctor")
	cmd.Dir = ws.Dir
	cmd.Env = cliEnv("PML_WORKSPACE="+ws.Dir, "PML_REGISTRIES=https://user:"+pw+"@registry.example.org")
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "PML_REGISTRIES") || !strings.Contains(string(out), "user name or password") || strings.Contains(string(out), pw) {
		t.Errorf("pml doctor with PML_REGISTRIES carrying a password does not refuse it, or shows the password:\n%s", out)
	}
}

// TestARefusedAddLeavesNoLockEntry (issue 50): pml add of a registry
// server whose install is not approved (no terminal, no --yes) exits 3
// and leaves no record of it in .pml/mcp.lock, so no later session
// fetches it: pml tools afterwards asks the registry nothing about it.
// Before, the refused entry stayed locked and every session fetched it.
func TestARefusedAddLeavesNoLockEntry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.everything.server.json", `{"type": "stdio", "description": "MCP test server", "routing": "local",
 "tools": ["everything:echo"],
 "install": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything@2026.8.31"]}}`)
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	code, _, stderr := runPML(t, ws, "add", "everything")
	if code != 3 || !strings.Contains(stderr, "not approved") {
		t.Fatalf("pml add everything without --yes and without a terminal: exit %d, want 3 (not approved)\n%s", code, stderr)
	}
	if b, err := os.ReadFile(ws.path(".pml/mcp.lock")); err == nil && strings.Contains(string(b), "everything") {
		t.Errorf("the refused add left its entry in .pml/mcp.lock:\n%s", b)
	}
	if b, err := os.ReadFile(ws.path(".pml/capabilities.json")); err == nil && strings.Contains(string(b), "everything") {
		t.Errorf("the refused add is recorded as a capability:\n%s", b)
	}
	before := requestsFor(reg, "everything")
	if code, _, stderr := runPML(t, ws, "tools"); code != 0 {
		t.Fatalf("pml tools: exit %d\n%s", code, stderr)
	}
	if after := requestsFor(reg, "everything"); after != before {
		t.Errorf("a later session fetched the refused entry again (%d requests, was %d)", after, before)
	}
}

// TestOneEntryAddedUnderSeveralSpellingsIsOneRecord (issue 50): the same
// registry entry added as notes, Notes and pml.mcp.notes.server is one
// record in .pml/capabilities.json (the last spelling), one pml run entry
// in .mcp.json and one item of .pml.json's capabilities; pml add says
// which spelling it replaced. Before, each spelling was a record and an
// .mcp.json server of its own, all running the same entry.
func TestOneEntryAddedUnderSeveralSpellingsIsOneRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.notes.server.ts", "export function count() { return 1; }\n")
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	for i, name := range []string{"notes", "Notes", "pml.mcp.notes.server"} {
		code, _, stderr := runPML(t, ws, "add", name)
		if code != 0 {
			t.Fatalf("pml add %s: exit %d\n%s", name, code, stderr)
		}
		if i > 0 && !strings.Contains(stderr, "replaces") {
			t.Errorf("pml add %s does not say which record it replaced:\n%s", name, stderr)
		}
	}
	var caps struct {
		Capabilities map[string]struct{ FQDN string } `json:"capabilities"`
	}
	readJSON(t, ws.path(".pml/capabilities.json"), &caps)
	if len(caps.Capabilities) != 1 {
		t.Errorf(".pml/capabilities.json holds %d records of one entry, want 1: %+v", len(caps.Capabilities), caps.Capabilities)
	} else if _, ok := caps.Capabilities["pml.mcp.notes.server"]; !ok {
		t.Errorf(".pml/capabilities.json does not hold the last spelling: %+v", caps.Capabilities)
	}
	var mcpJSON struct {
		MCPServers map[string]struct{ Args []string } `json:"mcpServers"`
	}
	readJSON(t, ws.path(".mcp.json"), &mcpJSON)
	runs := 0
	for _, s := range mcpJSON.MCPServers {
		if len(s.Args) == 2 && s.Args[0] == "run" {
			runs++
		}
	}
	if runs != 1 {
		t.Errorf(".mcp.json runs the one entry %d times, want once: %+v", runs, mcpJSON.MCPServers)
	}
	var pj struct {
		Capabilities []string `json:"capabilities"`
	}
	readJSON(t, ws.path(".pml.json"), &pj)
	if len(pj.Capabilities) != 1 {
		t.Errorf(".pml.json's capabilities: %v, want one item", pj.Capabilities)
	}
}

// TestTrustSaysWhatARegistryGets (issue 50): pml trust describes a
// registry as what it is: where code is fetched from and pinned, with no
// key sent there; and that is so: with PML_API_KEY set, pml add fetches
// from the registry without it. Before, pml trust said registries receive
// PML_API_KEY, which they never did.
func TestTrustSaysWhatARegistryGets(t *testing.T) {
	t.Parallel()
	const key = "pml-key-issue50-trust"
	var sawKey atomic.Int32
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.notes.server.ts", "export function count() { return 1; }\n")
	reg := startRegistry(t, dir)
	target := strings.TrimPrefix(reg.URL, "http://")
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for name, v := range r.Header {
			if strings.Contains(strings.Join(v, " "), key) {
				sawKey.Add(1)
				t.Errorf("the registry received the key in %s", name)
			}
		}
		r.URL.Scheme, r.URL.Host, r.RequestURI = "http", target, ""
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	defer front.Close()

	ws := newWorkspace(t, "")
	ws.writeUntrusted(".pml.json", registryConfig("", front.URL))
	out, _ := trustWith(t, ws, t.TempDir())
	out = logText(out)
	if !strings.Contains(out, front.URL) || !strings.Contains(out, "no key is sent there") || strings.Contains(out, "PML_API_KEY") {
		t.Errorf("pml trust does not say truly what a registry gets:\n%s", out)
	}

	// The cloud (where the key does go) is a closed loopback port: the
	// test reaches no network.
	ws2 := newWorkspace(t, registryConfig(`, "cloud": {"url": "http://127.0.0.1:1", "timeout": "1s"}`, front.URL))
	cmd := execPML(ws2, "add", "notes")
	cmd.Dir = ws2.Dir
	cmd.Env = append(cmd.Env, "PML_API_KEY="+key)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pml add notes with PML_API_KEY set: %v\n%s", err, b)
	}
	if sawKey.Load() != 0 {
		t.Errorf("the registry received PML_API_KEY %d times", sawKey.Load())
	}
}

// TestCleanupDryRunListsOnlyWhatItRemoves (issue 50): a .pml/deps.json
// whose records name "../../outside", "a/b" and ".partial-x" besides a
// stale server's: pml cleanup --dry-run lists the stale server alone (no
// path outside .pml/deps), and pml cleanup then deletes exactly that,
// exit 0, leaving the workspace's own files alone. Before, the dry run
// listed .pml/deps/../../outside, which the real run refused (exit 1)
// before it deleted anything.
func TestCleanupDryRunListsOnlyWhatItRemoves(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	rec := `{"spec": "x", "integrity": "sha512-AAAA", "installed_at": "2026-01-01T00:00:00Z"}`
	ws.writeUntrusted(".pml/deps.json", `{"servers": {"../../outside": `+rec+`, "a/b": `+rec+`, ".partial-x": `+rec+`, "stale": `+rec+`}}`)
	ws.writeUntrusted(".pml/deps/stale/node_modules/p/index.js", "1")
	ws.writeUntrusted("outside/keep.txt", "the project's own file")

	code, stdout, stderr := runPML(t, ws, "cleanup", "--dry-run")
	if code != 0 || !strings.Contains(stdout, "stale") || strings.Contains(stdout, "outside") || strings.Contains(stdout, "a/b") || strings.Contains(stdout, "partial") {
		t.Errorf("pml cleanup --dry-run: exit %d, want the stale server alone\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runPML(t, ws, "cleanup")
	if code != 0 || !strings.Contains(stdout, "stale") {
		t.Errorf("pml cleanup: exit %d, want the stale server deleted\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(ws.path(".pml/deps/stale")); err == nil {
		t.Error(".pml/deps/stale is still there")
	}
	if b, err := os.ReadFile(ws.path("outside/keep.txt")); err != nil || string(b) != "the project's own file" {
		t.Errorf("outside/keep.txt: %q %v", b, err)
	}
}
