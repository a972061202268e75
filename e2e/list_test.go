//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pml list says where each thing pml serves comes from, its version, and
// how it stands here: installed, image present, running (issue 32).

// npmPin reads the latest version of pkg from the npm registry the
// machine's npm configuration names, with its integrity and executable,
// as pml add npm: pins them.
func npmPin(t *testing.T, pkg string) (version, integrity, bin string) {
	t.Helper()
	reg := os.Getenv("npm_config_registry")
	if reg == "" {
		out, err := exec.Command("npm", "config", "get", "registry").Output()
		if err != nil {
			t.Fatalf("npm config get registry: %v", err)
		}
		reg = strings.TrimSpace(string(out))
	}
	resp, err := http.Get(strings.TrimRight(reg, "/") + "/" + strings.Replace(url.PathEscape(pkg), "%40", "@", 1))
	if err != nil {
		t.Fatalf("the npm registry: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var doc struct {
		DistTags map[string]string `json:"dist-tags"`
		Versions map[string]struct {
			Bin  map[string]string `json:"bin"`
			Dist struct {
				Integrity string `json:"integrity"`
			} `json:"dist"`
		} `json:"versions"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &doc) != nil {
		t.Fatalf("the npm registry on %s: %s\n%.300s", pkg, resp.Status, body)
	}
	version = doc.DistTags["latest"]
	v := doc.Versions[version]
	if len(v.Bin) != 1 || v.Dist.Integrity == "" {
		t.Fatalf("%s@%s: bin %v, integrity %q", pkg, version, v.Bin, v.Dist.Integrity)
	}
	for _, b := range v.Bin {
		bin = b
	}
	return version, v.Dist.Integrity, bin
}

// listJSON is pml list --format json, as far as these tests read it.
type listJSON struct {
	Builtin []struct {
		Name, Source, Version, Image string
		ImagePresent                 *bool `json:"image_present"`
	} `json:"builtin"`
	Servers []struct {
		Name, Source, Package, Version, Image, Install string
		Installed                                      bool
		ImagePresent                                   *bool `json:"image_present"`
		Running                                        *bool
		EngineErr                                      string `json:"engine_error"`
	} `json:"servers"`
	Capabilities []struct {
		Name, Source, Version, Package, Image, Install string
		Installed                                      bool
		ImagePresent                                   *bool `json:"image_present"`
		Running                                        *bool
		EngineErr                                      string `json:"engine_error"`
	} `json:"capabilities"`
	EngineErr string `json:"engine_error"`
}

func listState(t *testing.T, ws *workspace, env ...string) (listJSON, string) {
	t.Helper()
	r := runCLI(t, ws.Dir, append([]string{"PML_WORKSPACE=" + ws.Dir}, env...), "", "list")
	if r.code != 0 {
		t.Fatalf("pml list: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	j := runCLI(t, ws.Dir, append([]string{"PML_WORKSPACE=" + ws.Dir}, env...), "", "list", "--format", "json")
	var l listJSON
	if j.code != 0 || json.Unmarshal(j.stdout, &l) != nil || len(l.Servers) != 1 {
		t.Fatalf("pml list --format json: exit %d\n%s\n%s", j.code, j.stdout, j.stderr)
	}
	return l, string(r.stdout)
}

// row is the line of the table that starts with name.
func tableRow(table, name string) string {
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), name+" ") {
			return l
		}
	}
	return ""
}

func isTrue(b *bool) bool  { return b != nil && *b }
func isFalse(b *bool) bool { return b != nil && !*b }

// runningWithPurpose lists the running containers of ws whose purpose is purpose
// (docker's own view, whatever pml makes of their owners).
func runningWithPurpose(t *testing.T, dir, purpose string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-q", "--filter", "label=pml.workspace="+dir, "--filter", "label=pml.purpose="+purpose).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// TestListShowsSourceVersionAndState: an npm server in .pml.json and a
// capability added from a registry (pml registry serve on loopback, an
// entry in the seeds' format) are listed before their install, after it,
// while a pml stdio session runs them, after that pml was killed (its
// containers still there, but no one's servers) and with the engine
// unreachable.
func TestListShowsSourceVersionAndState(t *testing.T) {
	needImage(t, nodeImage)
	const pkg = "@modelcontextprotocol/server-memory"
	version, integrity, bin := npmPin(t, pkg)
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.everything.server.json", `{"type": "stdio", "description": "MCP test server", "routing": "local",
 "tools": ["everything:echo"],
 "install": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything@2026.8.31"]}}`)
	reg := startRegistry(t, dir)
	// The entry pml add npm: writes, here written by hand: nothing is
	// installed yet.
	ws := newWorkspace(t, registryConfig(fmt.Sprintf(`, "mcps": {"memory": {"image": %q, "command": "node",
  "args": [%q],
  "install": {"command": "npm", "args": ["install", "--prefix", "/deps", "--no-audit", "--no-fund", %q], "integrity": %q}}}`,
		nodeImage, "/deps/node_modules/"+pkg+"/"+strings.TrimPrefix(bin, "./"), pkg+"@"+version, integrity), reg.URL))

	began := time.Now()
	l, table := listState(t, ws)
	t.Logf("pml list before any install (%v):\n%s", time.Since(began), table)
	m := l.Servers[0]
	if m.Name != "memory" || m.Source != "npm" || m.Package != pkg || m.Version != version || m.Install != "missing" || m.Installed || !isTrue(m.ImagePresent) || !isFalse(m.Running) {
		t.Errorf("memory before its install: %+v", m)
	}
	if r := tableRow(table, "memory"); !strings.Contains(r, "npm "+pkg) || !strings.Contains(r, version) || !strings.Contains(r, "not installed") || !strings.Contains(r, "image present, stopped") {
		t.Errorf("memory's row before its install: %q", r)
	}
	if len(l.Capabilities) != 0 || !strings.Contains(table, "No capabilities added") {
		t.Errorf("capabilities before pml add: %+v\n%s", l.Capabilities, table)
	}
	fsRow := tableRow(table, "filesystem")
	if len(l.Builtin) == 0 || l.Builtin[0].Source != "built-in" || !strings.HasPrefix(l.Builtin[0].Image, "pml/toolbox:") || l.Builtin[0].Version == "" || l.Builtin[0].ImagePresent == nil {
		t.Errorf("the built-in groups: %+v", l.Builtin)
	}
	if !strings.Contains(fsRow, "built-in") || !strings.Contains(fsRow, l.Builtin[0].Version) {
		t.Errorf("filesystem's row: %q", fsRow)
	}

	if code, _, stderr := runPML(t, ws, "add", "everything", "--yes"); code != 0 {
		t.Fatalf("pml add everything: exit %d\n%s", code, stderr)
	}
	l, table = listState(t, ws)
	t.Logf("pml list after pml add everything:\n%s", table)
	if len(l.Capabilities) != 1 {
		t.Fatalf("capabilities after pml add: %+v", l.Capabilities)
	}
	c := l.Capabilities[0]
	if c.Name != "everything" || c.Source != reg.URL || len(c.Version) != 4 || c.Package != "@modelcontextprotocol/server-everything@2026.8.31" ||
		c.Image != nodeImage || c.Install != "installed" || !c.Installed || !isTrue(c.ImagePresent) || !isFalse(c.Running) {
		t.Errorf("the capability after pml add: %+v (registry %s)", c, reg.URL)
	}
	if r := tableRow(table, "everything"); !strings.Contains(r, reg.URL) || !strings.Contains(r, c.Version) || !strings.Contains(r, "installed, image present, stopped") {
		t.Errorf("everything's row: %q", r)
	}

	// A client's session installs memory (its tools are allowed) and
	// runs both servers.
	// A host id of its own: no other pml on this engine (other tests)
	// reaps the killed pml's containers before the list below looks.
	host := "PML_HOST_ID=" + privateHostID(t)
	s := startSession(t, ws, host)
	if _, res := s.call(t, "memory:read_graph", map[string]any{}); res.IsError {
		t.Fatalf("memory:read_graph: %s\n%s", text(res), s.stderr.String())
	}
	if out, res := s.call(t, "everything:echo", map[string]any{"message": "listed"}); res.IsError || !strings.Contains(out, "listed") {
		t.Fatalf("everything:echo: %q\n%s", out, s.stderr.String())
	}
	l, table = listState(t, ws, host)
	t.Logf("pml list while a session runs both:\n%s", table)
	if m := l.Servers[0]; m.Install != "installed" || !m.Installed || !isTrue(m.Running) {
		t.Errorf("memory while the session runs it: %+v", m)
	}
	if c := l.Capabilities[0]; !isTrue(c.Running) {
		t.Errorf("everything while the session runs it: %+v", c)
	}
	for _, name := range []string{"memory", "everything"} {
		if r := tableRow(table, name); !strings.Contains(r, "installed, image present, running") {
			t.Errorf("%s's row while it runs: %q", name, r)
		}
	}

	// pml dies with SIGKILL: its servers' containers may outlive it
	// until the next pml start removes them, but no one can call them.
	// (A server's container also ends by itself once its connection to
	// the dead pml closes: where it has, a stand-in with its labels runs
	// in its place, so that the case is always there.)
	labels := labelsOfRunning(t, ws.Dir, "mcp:memory")
	pid := s.cmd.Process.Pid
	killExitWatcher(t, pid)
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pml to die", 10*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	t.Cleanup(func() { removeOrphans(t, ws.Dir, pid) })
	// Another test's pml may reap the orphan at any moment (every pml
	// start does): the list proves something only when the orphan ran
	// both before and after it, so a reaped one is stood in for again.
	proved := false
	for try := 0; try < 5 && !proved; try++ {
		if len(runningWithPurpose(t, ws.Dir, "mcp:memory")) == 0 {
			standIn(t, labels)
		}
		if len(runningWithPurpose(t, ws.Dir, "mcp:memory")) == 0 {
			continue
		}
		l, table = listState(t, ws, host)
		if len(runningWithPurpose(t, ws.Dir, "mcp:memory")) == 0 {
			continue
		}
		proved = true
		if m, c := l.Servers[0], l.Capabilities[0]; !isFalse(m.Running) || !isFalse(c.Running) {
			t.Errorf("the servers of a killed pml are listed as running: %+v %+v\n%s", m, c, table)
		}
	}
	if !proved {
		t.Fatal("no container of the killed pml ran for memory through a whole pml list in 5 tries (other tests' pml reaped each): the orphan case would prove nothing")
	}
	removeOrphans(t, ws.Dir, pid)

	// The engine is unreachable: the list still comes, says what it
	// cannot know and why in one line, and exits 0.
	dead := "unix://" + filepath.Join(t.TempDir(), "docker.sock")
	r := runCLI(t, ws.Dir, []string{"PML_WORKSPACE=" + ws.Dir, "DOCKER_HOST=" + dead}, "", "list")
	t.Logf("pml list with the engine unreachable:\n%s", r.stdout)
	out := string(r.stdout)
	if r.code != 0 || strings.Count(out, "Image and container states are unknown: ") != 1 || !strings.Contains(out, dead) {
		t.Errorf("exit %d, want 0 and one line naming the engine:\n%s\n%s", r.code, out, r.stderr)
	}
	for _, name := range []string{"filesystem", "memory", "everything"} {
		if rw := tableRow(out, name); !strings.Contains(rw, "image and container unknown (engine unreachable)") || strings.Contains(rw, "stopped") || strings.Contains(rw, "running") {
			t.Errorf("%s's row with the engine unreachable: %q", name, rw)
		}
	}
	if strings.Contains(tableRow(out, "memory"), "not installed") || !strings.Contains(tableRow(out, "memory"), "installed") {
		t.Errorf("the install state (no engine needed) is lost: %q", tableRow(out, "memory"))
	}
	if len(r.stderr) != 0 {
		t.Errorf("pml list with the engine unreachable wrote to stderr:\n%s", r.stderr)
	}
	l, _ = listState(t, ws, "DOCKER_HOST="+dead)
	if m := l.Servers[0]; l.EngineErr == "" || m.EngineErr == "" || m.ImagePresent != nil || m.Running != nil || !m.Installed {
		t.Errorf("JSON with the engine unreachable: %+v (engine_error %q)", m, l.EngineErr)
	}
}

// removeOrphans removes the containers of workspace dir that the killed
// pml pid left.
// labelsOfRunning returns the labels of a running container of ws with
// purpose.
func labelsOfRunning(t *testing.T, dir, purpose string) map[string]string {
	t.Helper()
	ids := runningWithPurpose(t, dir, purpose)
	if len(ids) == 0 {
		t.Fatalf("no running container of %s with purpose %s", dir, purpose)
	}
	out, err := exec.Command("docker", "inspect", "--format", "{{json .Config.Labels}}", ids[0]).Output()
	if err != nil {
		t.Fatalf("docker inspect %s: %v", ids[0], err)
	}
	var labels map[string]string
	if err := json.Unmarshal(out, &labels); err != nil {
		t.Fatalf("labels of %s: %v", ids[0], err)
	}
	return labels
}

// standIn starts a sleeping container with labels (removeOrphans removes
// it with the killed pml's own).
func standIn(t *testing.T, labels map[string]string) {
	t.Helper()
	args := []string{"run", "-d", "--network", "none", "--user", "65534:65534"}
	for k, v := range labels {
		args = append(args, "--label", k+"="+v)
	}
	args = append(args, "pml/shell:busybox", "sleep", "300")
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("starting a stand-in for the killed pml's container: %v\n%s", err, out)
	}
}

func removeOrphans(t *testing.T, dir string, pid int) {
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=pml.workspace="+dir, "--filter", fmt.Sprintf("label=pml.owner.pid=%d", pid)).Output()
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		if out, err := exec.Command("docker", append([]string{"rm", "-f", "-v"}, ids...)...).CombinedOutput(); err != nil {
			t.Errorf("removing the killed pml's containers: %v\n%s", err, out)
		}
	}
}
