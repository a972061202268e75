//go:build linux

package e2e

import (
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The one-command path to a real MCP server (issue 32): pml add npm: and
// oci:, pml tools, list, remove, cleanup, and arguments checked against a
// tool's schema before anything runs.

// containerEvents lists the engine's container events for workspace dir
// between since and until (docker events, which sees containers that came
// and went, unlike a listing afterwards).
func containerEvents(t *testing.T, dir string, since, until time.Time) string {
	t.Helper()
	out, err := exec.Command("docker", "events", "--since", since.Format(time.RFC3339Nano), "--until", until.Format(time.RFC3339Nano),
		"--filter", "type=container", "--filter", "label=pml.workspace="+dir, "--format", "{{.Action}} {{.Actor.Attributes.image}}").CombinedOutput()
	if err != nil {
		t.Fatalf("docker events: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestWrongArgumentsAreRefusedBeforeAContainerStarts(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:read_file"]}}`)
	ws.write("x", "hello\n")
	// The same call spelt right runs in a container: the check below
	// would see one if the misspelt call got that far.
	since := time.Now()
	if r := runCLI(t, ws.Dir, nil, "", "call", "filesystem:read_file", `{"path":"x"}`); r.code != 0 {
		t.Fatalf("the right call: exit %d\n%s", r.code, r.stderr)
	}
	if ev := containerEvents(t, ws.Dir, since, time.Now()); !strings.Contains(ev, "start") {
		t.Fatalf("the right call started no container (events %q): this test could not see one", ev)
	}
	since = time.Now()
	r := runCLI(t, ws.Dir, nil, "", "call", "filesystem:read_file", `{"paht":"x"}`)
	out := callJSON(t, r)
	if r.code != 2 || !strings.Contains(out.Text, `"paht"`) || !strings.Contains(out.Text, `missing required argument "path"`) {
		t.Errorf("exit %d, text %q: want exit 2 naming paht and the missing path", r.code, out.Text)
	}
	if !strings.Contains(logText(r.stderr), `"paht"`) {
		t.Errorf("stderr does not name paht:\n%s", r.stderr)
	}
	time.Sleep(200 * time.Millisecond)
	if ev := containerEvents(t, ws.Dir, since, time.Now()); ev != "" {
		t.Errorf("a container was created for a call with wrong arguments:\n%s", ev)
	}
}

// TestAddNPMServersFromTheRealRegistry adds two servers from the npm
// registry the machine's npm configuration names, uses, lists, removes
// and cleans up after them as a person would, with nothing but pml
// commands (the policy pml add writes is trusted as pml's own write).
func TestAddNPMServersFromTheRealRegistry(t *testing.T) {
	needImage(t, nodeImage)
	ws := newWorkspace(t, "")
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runPML(t, ws, args...)
	}
	for _, pkg := range []string{"npm:@modelcontextprotocol/server-everything", "npm:@modelcontextprotocol/server-memory"} {
		code, stdout, stderr := run("add", pkg, "--yes", "--allow")
		if code != 0 {
			t.Fatalf("pml add %s: exit %d\n%s\n%s", pkg, code, stdout, stderr)
		}
		if !strings.Contains(stderr, "installed ") || !strings.Contains(stderr, "tools") {
			t.Errorf("pml add %s shows no install and tool count:\n%s", pkg, stderr)
		}
	}
	cfg := readFile(t, ws.path(".pml.json"))
	for _, want := range []string{`"everything": {`, `"memory": {`, `"integrity": "sha512-`, `/deps/node_modules/@modelcontextprotocol/server-everything/`, `"everything:*"`} {
		if !strings.Contains(cfg, want) {
			t.Errorf(".pml.json lacks %s:\n%s", want, cfg)
		}
	}
	// The package without its source says which source to write.
	if code, _, stderr := run("add", "@modelcontextprotocol/server-everything"); code != 2 || !strings.Contains(stderr, "pml add npm:@modelcontextprotocol/server-everything") {
		t.Errorf("pml add with a bare package name: exit %d\n%s", code, stderr)
	}
	// A second add of the same package clashes on the derived name and
	// changes nothing.
	if code, _, stderr := run("add", "npm:@modelcontextprotocol/server-everything", "--yes"); code != 2 || !strings.Contains(stderr, "--name") {
		t.Errorf("adding everything twice: exit %d\n%s", code, stderr)
	}
	if after := readFile(t, ws.path(".pml.json")); after != cfg {
		t.Errorf("a refused add changed .pml.json:\n%s", after)
	}

	code, stdout, stderr := run("tools", "--format", "json")
	var tools []struct {
		Name        string          `json:"name"`
		WireName    string          `json:"wire_name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &tools) != nil {
		t.Fatalf("pml tools --format json: exit %d\n%s\n%s", code, stdout, stderr)
	}
	seen := map[string]string{}
	for _, tl := range tools {
		seen[tl.Name] = tl.WireName
		if tl.Name == "everything:echo" && !strings.Contains(string(tl.InputSchema), `"message"`) {
			t.Errorf("everything:echo's schema: %s", tl.InputSchema)
		}
	}
	for name, wire := range map[string]string{"everything:echo": "everything__echo", "memory:read_graph": "memory__read_graph", "filesystem:read_file": "filesystem__read_file"} {
		if seen[name] != wire {
			t.Errorf("pml tools: %s has wire name %q, want %q (listed: %v)", name, seen[name], wire, seen)
		}
	}

	r := runCLI(t, ws.Dir, []string{"PML_WORKSPACE=" + ws.Dir}, "", "call", "everything:echo", `{"message":"hello from pml add"}`)
	if out := callJSON(t, r); r.code != 0 || !strings.Contains(out.Text, "hello from pml add") {
		t.Errorf("pml call everything:echo: exit %d %q\n%s", r.code, out.Text, r.stderr)
	}

	code, stdout, _ = run("list")
	for _, want := range []string{"everything", "npm @modelcontextprotocol/server-everything ", "memory", "npm @modelcontextprotocol/server-memory ", "installed, image present", "filesystem"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("pml list lacks %q: exit %d\n%s", want, code, stdout)
		}
	}

	if code, _, stderr := run("remove", "memory", "--clean", "--yes"); code != 0 {
		t.Fatalf("pml remove memory --clean: exit %d\n%s", code, stderr)
	}
	if cfg := readFile(t, ws.path(".pml.json")); strings.Contains(cfg, "memory") || !strings.Contains(cfg, `"everything": {`) {
		t.Errorf(".pml.json after remove:\n%s", cfg)
	}
	if _, err := os.Stat(ws.path(".pml/deps/memory")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf(".pml/deps/memory is still there (%v)", err)
	}
	for _, f := range []string{".pml/deps.json", ".pml/tools-cache.json"} {
		if s := readFile(t, ws.path(f)); strings.Contains(s, `"memory"`) || !strings.Contains(s, `"everything"`) {
			t.Errorf("%s after remove memory --clean:\n%s", f, s)
		}
	}
	if code, stdout, _ := run("cleanup", "--dry-run"); code != 0 || !strings.Contains(stdout, "Nothing to clean up") {
		t.Errorf("pml cleanup --dry-run after remove --clean: exit %d\n%s", code, stdout)
	}
	// What a hand-removed entry leaves behind is found and deleted.
	if err := os.MkdirAll(ws.path(".pml/deps/ghost/node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := run("cleanup", "--dry-run"); code != 0 || !strings.Contains(stdout, "ghost") || strings.Contains(stdout, "everything") {
		t.Errorf("pml cleanup --dry-run with a leftover: exit %d\n%s", code, stdout)
	}
	if _, err := os.Stat(ws.path(".pml/deps/ghost")); err != nil {
		t.Errorf("--dry-run deleted the leftover: %v", err)
	}
	if code, _, stderr := run("cleanup"); code != 0 {
		t.Errorf("pml cleanup: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(ws.path(".pml/deps/ghost")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cleanup left .pml/deps/ghost (%v)", err)
	}
	if _, err := os.Stat(ws.path(".pml/deps/everything")); err != nil {
		t.Errorf("cleanup deleted what everything uses: %v", err)
	}
}

// fakeNPM is an npm registry on loopback serving one package, whose
// metadata announces integrity for a tarball that has tarball as content.
func fakeNPM(t *testing.T, name string, integrity string, tarball []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.EscapedPath() {
		case "/" + strings.Replace(url.PathEscape(name), "%40", "@", 1):
			fmt.Fprintf(w, `{"name": %q, "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": {"bin": {"fake": "index.js"},
  "dist": {"integrity": %q, "tarball": %q}}}}`, name, integrity, "http://"+r.Host+"/fake-1.0.0.tgz")
		case "/fake-1.0.0.tgz":
			_, _ = w.Write(tarball)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func sri512(b []byte) string {
	sum := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

// TestAddRefusesAPackageWhoseTarballChangedUpstream: the registry
// announces one integrity and serves another tarball (a package changed
// under its version, or something in between): nothing is written.
func TestAddRefusesAPackageWhoseTarballChangedUpstream(t *testing.T) {
	tarball := []byte("the tarball as it is now")
	changed := fakeNPM(t, "@pml-test/server-fake", sri512([]byte("the tarball as it was pinned")), tarball)
	ws := newWorkspace(t, "")
	r := runCLI(t, ws.Dir, []string{"PML_WORKSPACE=" + ws.Dir, "npm_config_registry=" + changed.URL}, "", "add", "npm:@pml-test/server-fake", "--yes")
	if r.code != 1 || !strings.Contains(logText(r.stderr), "integrity mismatch") || !strings.Contains(logText(r.stderr), sri512(tarball)) {
		t.Errorf("exit %d, want 1 with the integrity mismatch and the tarball's real integrity:\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(ws.path(".pml.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused package wrote .pml.json (%v)", err)
	}
	// The same registry with the integrity that matches gets past the
	// check (to the consent, refused here for want of --yes): the
	// mismatch is what refused the first.
	same := fakeNPM(t, "@pml-test/server-fake", sri512(tarball), tarball)
	r = runCLI(t, ws.Dir, []string{"PML_WORKSPACE=" + ws.Dir, "npm_config_registry=" + same.URL}, "", "add", "npm:@pml-test/server-fake")
	if r.code != 3 || !strings.Contains(logText(r.stderr), "mcps.fake") || !strings.Contains(logText(r.stderr), "nothing was written") {
		t.Errorf("a matching package: exit %d, want 3 at the consent:\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(ws.path(".pml.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an unapproved add wrote .pml.json (%v)", err)
	}
}

// TestAddOCIServerFromALoopbackRegistry adds an MCP server shipped as an
// image by its tag: pml pulls it, pins the digest the registry gave and
// lists its tools; the image is then used by digest.
func TestAddOCIServerFromALoopbackRegistry(t *testing.T) {
	probeImage(t) // builds the probe server binary (probeBin)
	cli := imagesEngine(t)
	reg := startOCIRegistry(t)
	ref := reg.Addr + "/pml-e2e-" + imgNonce(t) + "/mcp-probe:v1"
	id := importTestImage(t, cli, ref, probeBin, nil)
	digest := pushImage(t, cli, ref)
	removeTestImage(t, cli, id) // pml add must pull it
	ws := newWorkspace(t, "")
	code, stdout, stderr := runPML(t, ws, "add", "oci:"+ref, "--yes", "--allow")
	if code != 0 {
		t.Fatalf("pml add oci:%s: exit %d\n%s\n%s", ref, code, stdout, stderr)
	}
	if !strings.Contains(stderr, "pulled ") || !strings.Contains(stdout, "probe:echo") {
		t.Errorf("no pull progress or no tool list:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	pinned := strings.TrimSuffix(ref, ":v1") + "@" + digest
	if cfg := readFile(t, ws.path(".pml.json")); !strings.Contains(cfg, `"image": "`+pinned+`"`) {
		t.Errorf(".pml.json does not pin %s:\n%s", pinned, cfg)
	}
	r := runCLI(t, ws.Dir, []string{"PML_WORKSPACE=" + ws.Dir}, "", "call", "probe:echo", `{"text":"from an image"}`)
	if out := callJSON(t, r); r.code != 0 || !strings.Contains(out.Text, "from an image") {
		t.Errorf("pml call probe:echo: exit %d %q\n%s", r.code, out.Text, r.stderr)
	}
	if code, stdout, _ := runPML(t, ws, "list"); code != 0 || !strings.Contains(stdout, "oci "+strings.TrimSuffix(ref, ":v1")) || !strings.Contains(stdout, digest[:len("sha256:")+12]+" ") || !strings.Contains(stdout, "image present, stopped") {
		t.Errorf("pml list: exit %d\n%s", code, stdout)
	}
	// While a client's session has the server up, pml list says so.
	s := startSession(t, ws)
	if out, res := s.call(t, "probe:echo", map[string]any{"text": "up"}); res.IsError || out != "up" {
		t.Fatalf("probe:echo in a session: %q", out)
	}
	if code, stdout, _ := runPML(t, ws, "list", "--format", "json"); code != 0 || !strings.Contains(stdout, `"running": true`) {
		t.Errorf("pml list with the server up: exit %d\n%s", code, stdout)
	}
	_ = s.Close()
}

// TestASeedFormatRegistryEntryRuns: an entry written as the seeds define
// them (an npx install line, routing "local", none of pml's container
// fields), served by pml registry serve, installs and answers.
func TestASeedFormatRegistryEntryRuns(t *testing.T) {
	needImage(t, nodeImage)
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.everything.server.json", `{"type": "stdio", "description": "MCP test server", "routing": "local",
 "tools": ["everything:echo"],
 "install": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything@2026.8.31"]}}`)
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	r := runCLI(t, ws.Dir, []string{"PML_WORKSPACE=" + ws.Dir}, "", "call", "everything:echo", `{"message":"seed format"}`)
	if out := callJSON(t, r); r.code != 0 || !strings.Contains(out.Text, "Echo: seed format") {
		t.Fatalf("pml call everything:echo: exit %d %q\n%s", r.code, out.Text, r.stderr)
	}
	// The first install's integrity is recorded: later installs must match.
	if deps := readFile(t, ws.path(".pml/deps.json")); !strings.Contains(deps, `"integrity": "sha512-`) {
		t.Errorf(".pml/deps.json records no integrity:\n%s", deps)
	}
}

// TestAFailedInstallWritesNothing: the package checks out on the host's
// loopback registry, whose tarball is no tarball (its integrity matches
// what the registry announces, so pml's own check passes; npm in the
// install container cannot unpack it): the install fails, pml add says
// nothing was written, and
// .pml.json, its trust record and .pml/deps are as they were.
func TestAFailedInstallWritesNothing(t *testing.T) {
	needImage(t, nodeImage)
	tarball := []byte("not really a tarball")
	reg := fakeNPM(t, "@pml-test/server-fake", sri512(tarball), tarball)
	ws := newWorkspace(t, "")
	ws.write(".pml.json", `{"permissions": {"allow": ["filesystem:*"]}}`+"\n")
	before, trustBefore := readFile(t, ws.path(".pml.json")), trustRecord(t, ws)
	r := runCLI(t, ws.Dir, []string{"PML_WORKSPACE=" + ws.Dir, "npm_config_registry=" + reg.URL}, "", "add", "npm:@pml-test/server-fake", "--yes")
	stderr := logText(r.stderr)
	if r.code == 0 || !strings.Contains(stderr, "installing fake: ") || !strings.Contains(stderr, "nothing was written to "+ws.path(".pml.json")) || strings.Contains(stderr, "wrote mcps.fake") {
		t.Errorf("exit %d, want the install's failure and that nothing was written:\n%s", r.code, stderr)
	}
	if after := readFile(t, ws.path(".pml.json")); after != before {
		t.Errorf(".pml.json changed:\n%s", after)
	}
	if tr := trustRecord(t, ws); tr != trustBefore {
		t.Errorf("the trust record changed:\n%s\nwas:\n%s", tr, trustBefore)
	}
	if _, err := os.Stat(ws.path(".pml/deps/fake")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed install left .pml/deps/fake (%v)", err)
	}
	if left := partials(t, ws); len(left) != 0 {
		t.Errorf("the failed install left %v", left)
	}
}
