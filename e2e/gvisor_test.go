//go:build linux && gvisor

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// The gVisor tests need the engine to offer runsc (`bash .ci/runsc.sh`
// registers Debian's; `make test-gvisor` runs them with it). Without it
// they fail and say so: a skip would count as a pass.

// needGVisor fails the test when the engine has no runsc runtime.
func needGVisor(t *testing.T) {
	t.Helper()
	info, err := engineClient(t).Info(context.Background())
	if err != nil {
		t.Fatalf("docker info: %v", err)
	}
	if _, ok := info.Runtimes["runsc"]; !ok {
		t.Fatalf("the engine has no runsc runtime (it has %v): run `bash .ci/runsc.sh` (installs Debian's runsc and registers it, see docs/gvisor.md)", runtimeNames(info.Runtimes))
	}
}

func runtimeNames[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// runtimesOf is the OCI runtime of every container of the workspace.
func runtimesOf(t *testing.T, dir string) []string {
	t.Helper()
	cli := engineClient(t)
	var out []string
	for _, c := range containersOf(t, dir) {
		ci, err := cli.ContainerInspect(context.Background(), c.ID)
		if err != nil {
			continue // gone meanwhile
		}
		out = append(out, ci.HostConfig.Runtime)
	}
	return out
}

// TestGVisorShellToolboxAndServer: with sandbox.runtime "runsc", shell:exec
// runs under gVisor's kernel (dmesg says so) with only lo, the workspace
// is read and written as under the default runtime (files land owned by
// the same user), the toolbox reads and writes it, and a pooled server
// runs on runsc too and reaches its allowed host through pml's egress
// proxy (a unix socket bind-mounted into the container) and no other.
func TestGVisorShellToolboxAndServer(t *testing.T) {
	needGVisor(t)
	web, webHost := hostHTTP(t, "hello through pml under gvisor")
	_, otherHost := hostHTTP(t, "must not be reached")
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "sandbox": {"runtime": "runsc", "network": {"allow": [%q]}},
  "mcps": {"probe": {"image": %q, "workspace": "rw", "network": {"allow": [%q]}}}}`, webHost, probeImage(t), webHost))
	ws.write("in.txt", "from the host")
	s := startSession(t, ws)

	out, res := s.call(t, "shell:exec", map[string]any{"command": "dmesg | head -n 1; ls /sys/class/net; cat in.txt; echo; echo from-gvisor > shell.txt; wget -q -O - " + web.URL + "/"})
	if res.IsError || !strings.Contains(out, "Starting gVisor") {
		t.Fatalf("shell:exec under runsc: dmesg does not show gVisor: %q", out)
	}
	if !strings.Contains(out, "\nlo\n") || strings.Contains(out, "eth0") {
		t.Errorf("interfaces under runsc: %q, want only lo", out)
	}
	if !strings.Contains(out, "from the host") {
		t.Errorf("the workspace is not readable under runsc: %q", out)
	}
	if !strings.Contains(out, "hello through pml under gvisor") {
		t.Errorf("shell:exec through the egress proxy under runsc: %q", out)
	}
	assertOwned(t, ws, "shell.txt", "from-gvisor\n")

	if out, res := s.call(t, "filesystem:write_file", map[string]any{"path": "toolbox.txt", "content": "written by the toolbox"}); res.IsError {
		t.Fatalf("filesystem:write_file under runsc: %q", out)
	}
	assertOwned(t, ws, "toolbox.txt", "written by the toolbox")
	if out, _ := s.call(t, "filesystem:read_file", map[string]any{"path": "shell.txt"}); out != "from-gvisor\n" {
		t.Errorf("filesystem:read_file under runsc: %q", out)
	}

	if out, _ := s.call(t, "probe:interfaces", nil); out != "lo" {
		t.Errorf("interfaces of the pooled server under runsc: %q, want only lo", out)
	}
	if out, _ := s.call(t, "probe:fetch", map[string]any{"url": web.URL + "/x"}); !strings.Contains(out, "status 200") || !strings.Contains(out, "hello through pml under gvisor") {
		t.Errorf("the pooled server through the egress proxy under runsc: %q", out)
	}
	if res := networkRefusal(t, s, "probe:fetch", map[string]any{"url": "http://" + otherHost + "/"}, otherHost); !strings.Contains(res, "status 403") {
		t.Errorf("another host from the server under runsc: %q, want 403", res)
	}
	if out, _ := s.call(t, "probe:write", map[string]any{"text": ws.path("server.txt")}); out != "ok" {
		t.Errorf("the pooled server writing the workspace under runsc: %q", out)
	}
	assertOwned(t, ws, "server.txt", "written by the probe\n")
	// The server's container (the one still running) is on runsc.
	if rts := runtimesOf(t, ws.Dir); len(rts) == 0 || slices.ContainsFunc(rts, func(r string) bool { return r != "runsc" }) {
		t.Errorf("runtimes of the workspace's containers: %v, want runsc only", rts)
	}
}

// assertOwned: rel holds want and belongs to the user the workspace's
// containers run as under the default runtime (the test's owner).
func assertOwned(t *testing.T, ws *workspace, rel, want string) {
	t.Helper()
	b, err := os.ReadFile(ws.path(rel))
	if err != nil || string(b) != want {
		t.Errorf("%s: %q, %v; want %q", rel, b, err, want)
		return
	}
	fi, _ := os.Stat(ws.path(rel))
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != ws.expectedUID() {
		t.Errorf("%s is owned by uid %d under runsc, want %d as under the default runtime", rel, st.Uid, ws.expectedUID())
	}
}

// TestGVisorPerServerRuntimeAndDeno: a server's own sandbox.runtime puts
// only that server on runsc; the Deno runner of pml:execute runs under
// runsc with the project's setting.
func TestGVisorPerServerRuntimeAndDeno(t *testing.T) {
	needGVisor(t)
	needImage(t, "pml/deno:2.9.6")
	fc := newFakeCloud(t)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "cloud": {"url": %q, "timeout": "5s"},
  "mcps": {"probe": {"image": %q, "workspace": "none", "sandbox": {"runtime": "runsc"}}}}`, fc.srv.URL, probeImage(t)))
	s := startSession(t, ws, "PML_API_KEY="+cloudKey)
	if out, _ := s.call(t, "probe:echo", map[string]any{"text": "hi"}); !strings.Contains(out, "hi") {
		t.Fatalf("probe:echo on runsc: %q", out)
	}
	if rts := runtimesOf(t, ws.Dir); !slices.Equal(rts, []string{"runsc"}) {
		t.Errorf("runtimes with only the server on runsc: %v, want [runsc]", rts)
	}
	// shell:exec keeps the project's runtime (the engine's default).
	if out, _ := s.call(t, "shell:exec", map[string]any{"command": "dmesg 2>&1 | head -n 1"}); strings.Contains(out, "gVisor") {
		t.Errorf("shell:exec ran under gVisor with only the server on runsc: %q", out)
	}
	s.Close()

	ws2 := newWorkspace(t, executeConfig(fc, `, "sandbox": {"runtime": "runsc"}`))
	ws2.write("notes.txt", "deno under gvisor")
	s2 := startSession(t, ws2, "PML_API_KEY="+cloudKey)
	// The run reads a file, then pauses on an approval of a write: its
	// container waits meanwhile, and runs on runsc.
	code := `const t = await mcp.filesystem.read_file({path: "notes.txt"});
await mcp.filesystem.write_file({path: "out.txt", content: t + " again"});
return t;`
	_, res := s2.call(t, "pml:execute", map[string]any{"code": code})
	var a approval
	structured(t, res, &a)
	if res.IsError || !a.ApprovalRequired || a.Tool != "filesystem:write_file" {
		t.Fatalf("pml:execute under runsc: want the inner write to ask, got %+v", a)
	}
	var rts []string
	for _, c := range containersOf(t, ws2.Dir) {
		if c.Labels["pml.purpose"] == "execute" && c.State == "running" {
			ci, err := engineClient(t).ContainerInspect(context.Background(), c.ID)
			if err == nil {
				rts = append(rts, ci.HostConfig.Runtime)
			}
		}
	}
	if !slices.Equal(rts, []string{"runsc"}) {
		t.Errorf("runtimes of the waiting Deno run: %v, want [runsc]", rts)
	}
	out, res := s2.call(t, "pml:execute", map[string]any{"code": code, "continue_workflow": cont(a.WorkflowID, true, false)})
	var r runResult
	structured(t, res, &r)
	if res.IsError || r.Status != "success" || !strings.Contains(string(r.Result), "deno under gvisor") {
		t.Fatalf("pml:execute under runsc after the approval: %q %+v", out, r)
	}
	assertOwned(t, ws2, "out.txt", "deno under gvisor again")
}

// TestGVisorAutoPicksRunsc: "auto" chooses runsc on an engine that has it,
// says so once, and every container of the session runs on it.
func TestGVisorAutoPicksRunsc(t *testing.T) {
	needGVisor(t)
	ws := newWorkspace(t, `{"permissions": {"allow": ["*"]}, "sandbox": {"runtime": "auto"}}`)
	s := startSession(t, ws)
	for i := 0; i < 2; i++ {
		if out, _ := s.call(t, "shell:exec", map[string]any{"command": "dmesg | head -n 1"}); !strings.Contains(out, "Starting gVisor") {
			t.Fatalf("auto with runsc registered: %q", out)
		}
	}
	if !s.logs(`tool containers run under gVisor`) {
		t.Errorf("auto did not say what it chose: %s", s.stderr.String())
	}
	if n := strings.Count(s.stderr.String(), `sandbox.runtime \"auto\"`); n != 1 {
		t.Errorf("auto's choice was said %d times, want once: %s", n, s.stderr.String())
	}
}
