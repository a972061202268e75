//go:build linux

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dc "github.com/ory/dockertest/v3/docker"
)

const allowAll = `{"permissions": {"allow": ["filesystem:*", "shell:exec"]}}`

func TestToolsListAnswersWithoutStartingAContainer(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	s := startSession(t, ws)
	tools, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"filesystem:read_file", "filesystem:read_multiple_files", "filesystem:write_file", "filesystem:edit_file",
		"filesystem:list_directory", "filesystem:directory_tree", "filesystem:create_directory", "filesystem:move_file",
		"filesystem:search_files", "filesystem:get_file_info", "shell:exec"}
	got := map[string]*mcp.Tool{}
	for _, tool := range tools.Tools {
		got[pmlName(tool.Name)] = tool
	}
	for _, name := range want {
		tool, ok := got[name]
		if !ok {
			t.Errorf("tools/list lacks %s", name)
			continue
		}
		if tool.Description == "" || tool.InputSchema == nil {
			t.Errorf("%s has no description or schema", name)
		}
	}
	if n := len(containersOf(t, ws.Dir)); n != 0 {
		t.Errorf("initialize + tools/list started %d containers", n)
	}
}

func TestInitializeAndToolsListWorkWithoutDocker(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	ws.write("a.txt", "x")
	s := startSession(t, ws, "DOCKER_HOST=unix:///nonexistent/docker.sock")
	if _, err := s.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("tools/list without a daemon: %v", err)
	}
	out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
	if !res.IsError || !strings.Contains(out, "Docker daemon does not answer") {
		t.Errorf("a call without a daemon should say the daemon does not answer, got isError=%v %q", res.IsError, out)
	}
}

func TestReadInsideTheWorkspace(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	p := ws.write("docs/hello.txt", "hello, container\n")
	s := startSession(t, ws)
	for _, path := range []string{"docs/hello.txt", p, "./docs/../docs/hello.txt"} {
		out, res := s.call(t, "filesystem:read_file", map[string]any{"path": path})
		if res.IsError || out != "hello, container\n" {
			t.Errorf("read_file(%q) = isError=%v %q", path, res.IsError, out)
		}
	}
	out, res := s.call(t, "filesystem:list_directory", map[string]any{"path": "docs"})
	if res.IsError || !strings.Contains(out, "[FILE] hello.txt") {
		t.Errorf("list_directory = %q", out)
	}
}

func TestReadsAndWritesOutsideAreRefusedAndChangeNothing(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("top secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, ws.path("escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, ws.path("secret-link")); err != nil {
		t.Fatal(err)
	}
	s := startSession(t, ws)

	reads := []string{"/etc/passwd", "../../etc/passwd", secret, "escape/secret.txt", "secret-link", "/proc/self/root/etc/passwd"}
	for _, p := range reads {
		out, res := s.call(t, "filesystem:read_file", map[string]any{"path": p})
		if !res.IsError || !strings.Contains(out, "outside the workspace") {
			t.Errorf("read_file(%q) must be refused as outside the workspace, got isError=%v %q", p, res.IsError, out)
		}
		if strings.Contains(out, "root:") || strings.Contains(out, "top secret") {
			t.Errorf("read_file(%q) leaked content: %q", p, out)
		}
	}
	writes := []string{filepath.Join(outside, "new.txt"), "../new.txt", "escape/new.txt", "escape/secret.txt", "secret-link"}
	for _, p := range writes {
		out, res := s.call(t, "filesystem:write_file", map[string]any{"path": p, "content": "pwned"})
		if !res.IsError || !strings.Contains(out, "outside the workspace") {
			t.Errorf("write_file(%q) must be refused, got isError=%v %q", p, res.IsError, out)
		}
	}
	_, res := s.call(t, "filesystem:move_file", map[string]any{"source": "secret-link", "destination": "/tmp/moved"})
	if !res.IsError {
		t.Error("move_file out of the workspace must be refused")
	}
	if b, _ := os.ReadFile(secret); string(b) != "top secret" {
		t.Errorf("the file outside changed: %q", b)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("files appeared outside the workspace: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws.Dir), "new.txt")); err == nil {
		t.Error("../new.txt was written next to the workspace")
	}
}

func TestAWrittenFileBelongsToTheContainerUser(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	s := startSession(t, ws)
	out, res := s.call(t, "filesystem:write_file", map[string]any{"path": "out/new.txt", "content": "from the sandbox"})
	if !res.IsError {
		t.Fatalf("write into a missing directory should fail clearly, got %q", out)
	}
	if _, res := s.call(t, "filesystem:create_directory", map[string]any{"path": "out"}); res.IsError {
		t.Fatal("create_directory failed")
	}
	out, res = s.call(t, "filesystem:write_file", map[string]any{"path": "out/new.txt", "content": "from the sandbox"})
	if res.IsError {
		t.Fatalf("write_file: %s", out)
	}
	st, err := os.Stat(ws.path("out/new.txt"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(ws.path("out/new.txt"))
	if string(b) != "from the sandbox" {
		t.Errorf("content = %q", b)
	}
	sys := st.Sys().(*syscall.Stat_t)
	if int(sys.Uid) != ws.expectedUID() || sys.Uid == 0 {
		t.Errorf("the written file belongs to uid %d, want %d (never 0)", sys.Uid, ws.expectedUID())
	}
	out, res = s.call(t, "filesystem:edit_file", map[string]any{"path": "out/new.txt", "edits": []map[string]any{{"oldText": "sandbox", "newText": "toolbox"}}})
	if res.IsError {
		t.Fatalf("edit_file: %s", out)
	}
	if b, _ := os.ReadFile(ws.path("out/new.txt")); string(b) != "from the toolbox" {
		t.Errorf("after edit: %q", b)
	}
}

func TestReadToolsGetAReadOnlyMount(t *testing.T) {
	// Defence in depth: even if the broker's checks were bypassed, a read
	// tool's container cannot write. Observe it from inside with the shell
	// image would need a second tool, so check the mount of a running read
	// container instead: covered by the policy test for rw, and here by the
	// fact that the toolbox agent reports a read-only file system.
	ws := newWorkspace(t, allowAll)
	ws.write("a.txt", "a")
	s := startSession(t, ws)
	out, res := s.call(t, "filesystem:get_file_info", map[string]any{"path": "a.txt"})
	if res.IsError || !strings.Contains(out, "size: 1") {
		t.Errorf("get_file_info = %q", out)
	}
}

func TestShellSeesOnlyLoopbackAndCannotReachTheHost(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	ln, accepted := hostListener(t)
	port := ln.Addr().(*net.TCPAddr).Port
	s := startSession(t, ws)

	out, res := s.call(t, "shell:exec", map[string]any{"command": "ls /sys/class/net"})
	var sh struct {
		Stdout   string `json:"stdout"`
		ExitCode int    `json:"exit_code"`
	}
	structured(t, res, &sh)
	if res.IsError || strings.Fields(sh.Stdout) == nil || strings.Join(strings.Fields(sh.Stdout), ",") != "lo" {
		t.Errorf("interfaces inside the container = %q (want only lo); %s", sh.Stdout, out)
	}
	out, res = s.call(t, "shell:exec", map[string]any{"command": fmt.Sprintf("nc -w 3 127.0.0.1 %d </dev/null", port)})
	structured(t, res, &sh)
	if !res.IsError || sh.ExitCode == 0 {
		t.Errorf("a dial to the host's loopback listener succeeded: %s", out)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host listener accepted %d connections from the sandbox", n)
	}
	_, res = s.call(t, "shell:exec", map[string]any{"command": "id -u; pwd", "cwd": "."})
	structured(t, res, &sh)
	lines := strings.Fields(sh.Stdout)
	if res.IsError || len(lines) != 2 || lines[0] != fmt.Sprint(ws.expectedUID()) || lines[1] != ws.Dir {
		t.Errorf("id -u; pwd = %q, want uid %d and %s", sh.Stdout, ws.expectedUID(), ws.Dir)
	}
}

func TestShellReportsExitCodeAndStderr(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	s := startSession(t, ws)
	_, res := s.call(t, "shell:exec", map[string]any{"command": "echo out; echo err >&2; exit 3"})
	var sh struct {
		Stdout, Stderr string
		ExitCode       int `json:"exit_code"`
	}
	structured(t, res, &sh)
	if !res.IsError || sh.ExitCode != 3 || sh.Stdout != "out\n" || sh.Stderr != "err\n" {
		t.Errorf("got isError=%v %+v", res.IsError, sh)
	}
	out, res := s.call(t, "shell:exec", map[string]any{"command": "pwd", "cwd": "/etc"})
	if !res.IsError || !strings.Contains(out, "outside the workspace") {
		t.Errorf("a cwd outside the workspace must be refused, got %q", out)
	}
}

func TestOutputIsCappedWithANote(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	s := startSession(t, ws)
	// 30 MB: more than the 10 MiB output cap, and more than an MCP client
	// accepts in one message. The call must still answer, with a note.
	out, res := s.call(t, "shell:exec", map[string]any{"command": "yes 0123456789abcdef | head -c 30000000"})
	if !strings.Contains(out, "output truncated") || len(out) > 11<<20 || len(out) < 1<<20 {
		t.Errorf("30 MB of output: kept %d bytes of text, note present=%v", len(out), strings.Contains(out, "output truncated"))
	}
	if res.StructuredContent != nil {
		var sh struct{ Truncated bool }
		structured(t, res, &sh)
		if !sh.Truncated {
			t.Error("structured content does not say truncated")
		}
	}
	// The session is still usable.
	if out, res := s.call(t, "shell:exec", map[string]any{"command": "echo small"}); res.IsError || !strings.Contains(out, "small") {
		t.Errorf("after a large result: %q", out)
	}
}

func TestARunningContainerHasThePolicy(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	s := startSession(t, ws)
	done := make(chan string, 1)
	go func() {
		out, _ := s.call(t, "shell:exec", map[string]any{"command": "sleep 4; echo done"})
		done <- out
	}()
	waitFor(t, "the shell container to start", 30*time.Second, func() bool {
		for _, c := range containersOf(t, ws.Dir) {
			if c.State == "running" {
				return true
			}
		}
		return false
	})
	c := containersOf(t, ws.Dir)[0]
	info, err := pool.Client.InspectContainer(c.ID)
	if err != nil {
		t.Fatal(err)
	}
	hc := info.HostConfig
	checks := []struct {
		what string
		ok   bool
	}{
		{"network none", hc.NetworkMode == "none"},
		{"read-only rootfs", hc.ReadonlyRootfs},
		{"tmpfs /tmp", hc.Tmpfs["/tmp"] != ""},
		{"cap-drop ALL", len(hc.CapDrop) == 1 && hc.CapDrop[0] == "ALL" && len(hc.CapAdd) == 0},
		{"no-new-privileges", strings.Contains(strings.Join(hc.SecurityOpt, ","), "no-new-privileges")},
		{"pids limit", hc.PidsLimit > 0},
		{"memory limit", hc.Memory > 0 && hc.MemorySwap == hc.Memory},
		{"cpu limit", nanoCPUs(t, c.ID) > 0},
		{"not root", info.Config.User != "" && !strings.HasPrefix(info.Config.User, "0:") && info.Config.User != "0" && info.Config.User != "root"},
		{"labels", info.Config.Labels["pml.managed"] == "true" && info.Config.Labels["pml.owner.pid"] != "" && info.Config.Labels["pml.purpose"] == "pool:shell"},
		{"only the workspace mounted, at its own path (pml's own files in it read-only)", onlyWorkspaceMounted(info.Mounts, ws.Dir)},
	}
	for _, m := range info.Mounts {
		if strings.Contains(m.Source, "docker.sock") {
			t.Error("the Docker socket is mounted")
		}
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("policy: %s does not hold (host config %+v, user %q, mounts %+v)", c.what, hc, info.Config.User, info.Mounts)
		}
	}
	if out := <-done; !strings.Contains(out, "done") {
		t.Errorf("the call did not finish normally: %q", out)
	}
}

func TestACallPastItsTimeoutIsKilledAndReported(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["*"]}, "sandbox": {"timeout": "5s"}}`)
	s := startSession(t, ws)
	// The call below must have started its command within its 5 s: it
	// takes a pre-started container, which a first call leaves behind (a
	// container the engine makes for the call can take longer than that
	// on a loaded engine, and then nothing has started).
	warmShellPool(t, s)
	out, res := s.call(t, "shell:exec", map[string]any{"command": "echo started; sleep 60"})
	if !res.IsError || !strings.Contains(out, "timed out after 5s") || !strings.Contains(out, "started") {
		t.Errorf("got isError=%v %q", res.IsError, out)
	}
	out, res = s.call(t, "shell:exec", map[string]any{"command": "sleep 60", "timeout_ms": 500})
	if !res.IsError || !strings.Contains(out, "timed out after 500ms") {
		t.Errorf("timeout_ms: got %q", out)
	}
	// assertNoContainers (cleanup) proves the containers are gone.
}

func TestACancelledCallKillsItsContainer(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	s := startSession(t, ws)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "shell:exec", Arguments: map[string]any{"command": "sleep 60"}})
		errc <- err
	}()
	// The first call of a kind starts its own container (the pool fills
	// behind it once it is done): the only one there is.
	var id string
	waitFor(t, "the container to run", 30*time.Second, func() bool {
		if l := containersOf(t, ws.Dir); len(l) > 0 {
			id = l[0].ID
		}
		return id != ""
	})
	cancel()
	<-errc
	waitFor(t, "the cancelled call's container to be removed", 20*time.Second, func() bool {
		for _, c := range containersOf(t, ws.Dir) {
			if c.ID == id {
				return false
			}
		}
		return true
	})
	// The session still works.
	out, res := s.call(t, "shell:exec", map[string]any{"command": "echo alive"})
	if res.IsError || !strings.Contains(out, "alive") {
		t.Errorf("after a cancel: %q", out)
	}
}

func TestLeftoversOfAKilledPMLAreReapedByTheNextStart(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	// A host id of its own: any pml starting on this host (another test's,
	// on a shared daemon) removes a dead pml's containers, and could do so
	// before the count below; with this id only the next start here may.
	hostID := "PML_HOST_ID=" + privateHostID(t)
	s := startSession(t, ws, hostID)
	go func() {
		_, _ = s.CallTool(context.Background(), &mcp.CallToolParams{Name: "shell:exec", Arguments: map[string]any{"command": "sleep 120"}})
	}()
	waitFor(t, "the container to run", 30*time.Second, func() bool { return len(containersOf(t, ws.Dir)) > 0 })
	pid := s.cmd.Process.Pid
	killExitWatcher(t, pid)
	if err := s.cmd.Process.Kill(); err != nil { // SIGKILL: no cleanup possible
		t.Fatal(err)
	}
	// The go-sdk transport reaps the process; wait until it is dead.
	waitFor(t, "pml to die", 10*time.Second, func() bool { return !running(pid) })
	time.Sleep(500 * time.Millisecond)
	if n := len(containersOf(t, ws.Dir)); n == 0 {
		t.Fatal("the container vanished with pml: the test proves nothing")
	}
	startSession(t, ws, hostID)
	waitFor(t, "the next pml to remove the orphan", 30*time.Second, func() bool { return len(containersOf(t, ws.Dir)) == 0 })
}

func TestPermissions(t *testing.T) {
	ws := newWorkspace(t, `{"permissions": {"allow": ["filesystem:*"], "deny": ["shell:*"], "ask": ["filesystem:write_file"]}}`)
	ws.write("a.txt", "a")
	s := startSession(t, ws)
	out, res := s.call(t, "shell:exec", map[string]any{"command": "true"})
	if !res.IsError || !strings.Contains(out, `deny pattern "shell:*"`) {
		t.Errorf("deny: %q", out)
	}
	out, res = s.call(t, "filesystem:write_file", map[string]any{"path": "a.txt", "content": "changed"})
	var a approval
	structured(t, res, &a)
	if res.IsError || !a.ApprovalRequired || !strings.Contains(out, "Approval required") {
		t.Errorf("ask: %q", out)
	}
	if b, _ := os.ReadFile(ws.path("a.txt")); string(b) != "a" {
		t.Errorf("an asked call changed the file: %q", b)
	}
	if _, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"}); res.IsError {
		t.Error("allow: read_file refused")
	}
	// An unknown tool is a protocol error (MCP: invalid params), and the
	// session goes on.
	_, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "nosuch:tool"})
	if err == nil || !strings.Contains(err.Error(), `unknown tool "nosuch:tool"`) {
		t.Errorf("unknown tool: %v", err)
	}
	if _, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"}); res.IsError {
		t.Error("the session broke after an unknown tool")
	}
}

func TestWithoutPmlJSONReadsAreAllowedAndWritesAsked(t *testing.T) {
	ws := newWorkspace(t, "")
	ws.write("a.txt", "a")
	s := startSession(t, ws)
	if out, res := s.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"}); res.IsError {
		t.Errorf("read: %q", out)
	}
	out, res := s.call(t, "shell:exec", map[string]any{"command": "true"})
	var a approval
	structured(t, res, &a)
	if res.IsError || !a.ApprovalRequired || a.Tool != "shell:exec" {
		t.Errorf("shell without .pml.json: %q", out)
	}
	if _, err := os.Stat(ws.path(".pml.json")); err == nil {
		t.Error("asking created .pml.json")
	}
}

func TestAnInvalidConfigIsAClearError(t *testing.T) {
	ws := newWorkspace(t, `{"sandbox": {"pids": "lots"}}`)
	cmd := execPML(ws, "stdio")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), ".pml.json") || !strings.Contains(string(out), "sandbox.pids") {
		t.Errorf("pml stdio with a bad config: err=%v output=%q", err, out)
	}
}

// TestAClientThatDisconnectsMidCallCancelsIt closes pml's stdin while a
// call runs, as an editor does when it quits: pml must kill and remove
// the call's container and exit on its own, without a signal.
func TestAClientThatDisconnectsMidCallCancelsIt(t *testing.T) {
	ws := newWorkspace(t, allowAll)
	cmd := execPML(ws, "stdio")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"quitter","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shell:exec","arguments":{"command":"sleep 120"}}}`,
	} {
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the call's container to run", 30*time.Second, func() bool { return len(containersOf(t, ws.Dir)) > 0 })
	stdin.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("pml did not exit cleanly after the client left: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("pml is still running 30 s after its client disconnected")
	}
	if n := len(containersOf(t, ws.Dir)); n != 0 {
		t.Errorf("%d containers left after the client disconnected", n)
	}
}

// running reports whether pid is alive and not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// onlyWorkspaceMounted: the workspace at its own path, and nothing else
// but read-only mounts of pml's own files inside it.
func onlyWorkspaceMounted(mounts []dc.Mount, ws string) bool {
	sawWS := false
	for _, m := range mounts {
		switch {
		case m.Source == ws && m.Destination == ws:
			sawWS = true
		case m.Source == m.Destination && !m.RW && (m.Source == ws+"/.pml" || m.Source == ws+"/.pml.json" || m.Source == ws+"/.mcp.json" || m.Source == ws+"/.env"):
		case m.Destination == "/.pml/supervisor" && !m.RW:
			// pml's own program, read-only: the shell's PID 1 that gives
			// the container its own deadline (internal/supervise).
		default:
			return false
		}
	}
	return sawWS
}
