//go:build linux

package e2e

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dc "github.com/ory/dockertest/v3/docker"
)

// Images of real MCP servers, built locally by `make images-test` (go-sdk
// examples, mark3labs/mcp-filesystem-server) and `make images-node`.
const (
	everythingImage = "pml-test/everything:1.8.0"
	memoryImage     = "pml-test/memory:1.8.0"
	fsServerImage   = "pml-test/filesystem:0.11.1"
	nodeImage       = "pml/node:18"
	// npmMemoryIntegrity is what npm records for
	// @modelcontextprotocol/server-memory@2026.8.31.
	npmMemoryIntegrity = "sha512-ljj/3S4aGjxdNSQWw6gucKKGnTLdBPWxzapyY/MT2tOVyZwvxChvevXSLPwx59nKJAlVpUVW+cOlnVRXRwiqMQ=="
)

var (
	probeOnce  sync.Once
	probeRef   string
	probeBin   string // the same binary, for native runs in benchmarks
	probeError error
)

// probeImage builds e2e/testservers/probe into a FROM scratch image once,
// tagged by the binary's digest so a rerun reuses it.
func probeImage(t testing.TB) string {
	t.Helper()
	probeOnce.Do(func() {
		root, _ := filepath.Abs("..")
		dir := filepath.Join(root, "bin", "testservers")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			probeError = err
			return
		}
		probeBin = filepath.Join(dir, "probe")
		if pre := os.Getenv("PML_E2E_PROBE_BIN"); pre != "" {
			// Built beforehand (.ci/test-user.sh: a user other than the
			// checkout's owner can neither write bin/ nor read git's
			// state for the build's stamp).
			probeBin = pre
		} else {
			build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", probeBin, "./e2e/testservers/probe")
			build.Dir = root
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				probeError = fmt.Errorf("building the probe server: %v\n%s", err, out)
				return
			}
		}
		bin, _ := os.ReadFile(probeBin)
		probeRef = fmt.Sprintf("pml-test/probe:%x", sha256.Sum256(bin))[:len("pml-test/probe:")+12]
		if _, err := pool.Client.InspectImage(probeRef); err == nil {
			return
		}
		ctxDir, err := os.MkdirTemp("", "pml-probe-")
		if err != nil {
			probeError = err
			return
		}
		defer os.RemoveAll(ctxDir)
		df := "FROM scratch\nCOPY probe /probe\nLABEL pml.image=test\nENTRYPOINT [\"/probe\"]\n"
		if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(df), 0o644); err != nil {
			probeError = err
			return
		}
		if err := os.WriteFile(filepath.Join(ctxDir, "probe"), bin, 0o755); err != nil {
			probeError = err
			return
		}
		if out, err := exec.Command("docker", "build", "-q", "-t", probeRef, ctxDir).CombinedOutput(); err != nil {
			probeError = fmt.Errorf("docker build of the probe image: %v\n%s", err, out)
		}
	})
	if probeError != nil {
		t.Fatal(probeError)
	}
	return probeRef
}

func needImage(t testing.TB, ref string) {
	t.Helper()
	if _, err := pool.Client.InspectImage(ref); err != nil {
		t.Fatalf("image %s is missing: run `make images` (it builds it locally, no registry needed): %v", ref, err)
	}
}

func probeConfig(t *testing.T, extra string) string {
	return fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"probe": {"image": %q%s}}}`, probeImage(t), extra)
}

func TestAStdioServerRunsPooledAndLockedDown(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, `, "env": {"GREETING": "hello ${E2E_PML_GREETING}"}`))
	// With sandbox.prestart off a server starts at its first use (on,
	// the session's start starts it: prestart_test.go).
	s := startSession(t, ws, "E2E_PML_GREETING=from-the-host", "E2E_PML_SECRET=must-not-leak", "PML_SANDBOX_PRESTART=off")
	if n := len(containersOf(t, ws.Dir)); n != 0 {
		t.Fatalf("%d containers after initialize; with sandbox.prestart off servers start on first use", n)
	}
	tools, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, pmlName(tool.Name))
	}
	if !strings.Contains(strings.Join(names, " "), "probe:echo") {
		t.Fatalf("probe tools not listed: %v", names)
	}

	out, _ := s.call(t, "probe:env", nil)
	if !strings.Contains(out, "GREETING=hello from-the-host") {
		t.Errorf("${NAME} was not expanded: %q", out)
	}
	if strings.Contains(out, "must-not-leak") || strings.Contains(out, "PML_") {
		t.Errorf("host environment reached the server:\n%s", out)
	}
	if out, _ := s.call(t, "probe:interfaces", nil); out != "lo" {
		t.Errorf("interfaces inside the server container: %q, want only lo", out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if out, _ := s.call(t, "probe:dial", map[string]any{"addr": ln.Addr().String()}); !strings.Contains(out, "dial failed") {
		t.Errorf("the server reached the host's loopback listener: %q", out)
	}
	if out, _ := s.call(t, "probe:whoami", nil); strings.Contains(out, "uid=0 ") || !strings.Contains(out, "cwd="+ws.Dir) {
		t.Errorf("whoami: %q", out)
	}
	for i := 0; i < 5; i++ {
		if out, res := s.call(t, "probe:echo", map[string]any{"text": fmt.Sprint("n", i)}); res.IsError || out != fmt.Sprint("n", i) {
			t.Errorf("echo %d: %q", i, out)
		}
	}
	list := containersOf(t, ws.Dir)
	if len(list) != 1 {
		t.Fatalf("%d containers for one pooled server, want 1", len(list))
	}
	c, err := pool.Client.InspectContainer(list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	hc := c.HostConfig
	if hc.NetworkMode != "none" || !hc.ReadonlyRootfs || len(hc.CapDrop) == 0 || hc.CapDrop[0] != "ALL" ||
		c.Config.User == "" || strings.HasPrefix(c.Config.User, "0:") || c.Config.Labels["pml.purpose"] != "mcp:probe" {
		t.Errorf("server container policy: network=%s ro=%v capdrop=%v user=%q labels=%v",
			hc.NetworkMode, hc.ReadonlyRootfs, hc.CapDrop, c.Config.User, c.Config.Labels)
	}
	for _, m := range c.Mounts {
		if m.Destination == ws.Dir && m.RW {
			t.Errorf("workspace mounted read-write for a \"ro\" server")
		}
	}
	// Closing the session stops the server (checked by the cleanup).
}

func TestFiftyConcurrentCallsGetTheirOwnAnswers(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, ""))
	s := startSession(t, ws)
	var wg sync.WaitGroup
	errs := make(chan string, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf("call-%02d", i)
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "probe:sleep", Arguments: map[string]any{"ms": 20 * (i % 5), "tag": want}})
			if err != nil {
				errs <- err.Error()
				return
			}
			if got := text(res); got != "slept "+want {
				errs <- fmt.Sprintf("call %d got %q", i, got)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := len(containersOf(t, ws.Dir)); n != 1 {
		t.Errorf("%d containers, want the one pooled server", n)
	}
}

// TestParallelSlowCallsOverlap: eight 1-second calls to one server take
// about one second, not eight. The bound (half the serial time) only
// proves the calls are not serialised; speed lives in `make bench`.
func TestParallelSlowCallsOverlap(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, ""))
	s := startSession(t, ws)
	s.call(t, "probe:echo", map[string]any{"text": "warm"})
	began := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.call(t, "probe:sleep", map[string]any{"ms": 1000, "tag": fmt.Sprint(i)})
		}()
	}
	wg.Wait()
	if took := time.Since(began); took > 4*time.Second {
		t.Errorf("8 parallel 1 s calls took %v: they were serialised", took)
	}
}

func TestProgressReachesTheCaller(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, ""))
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	client := mcp.NewClient(&mcp.Implementation{Name: "progress", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, req.Params)
			mu.Unlock()
		},
	})
	cmd := execPML(ws, "stdio")
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "probe:sleep", Arguments: map[string]any{"ms": 900, "steps": 3, "tag": "p"}}
	params.SetProgressToken("my-token")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("%v %v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 2 {
		t.Fatalf("%d progress notifications reached the client, want at least 2", len(got))
	}
	for _, p := range got {
		if p.ProgressToken != "my-token" || p.Total != 3 {
			t.Errorf("progress %+v: the client's own token must come back", p)
		}
	}
}

func TestACancelledServerCallStops(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, ""))
	s := startSession(t, ws)
	s.call(t, "probe:echo", map[string]any{"text": "warm"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "probe:sleep", Arguments: map[string]any{"ms": 60000, "steps": 60}})
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	cancel()
	<-done
	waitFor(t, "the server to see the cancellation", 10*time.Second, func() bool {
		out, _ := s.call(t, "probe:cancelled", nil)
		return out == "1"
	})
}

func TestAKilledServerFailsItsCallsAndRestarts(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, ""))
	s := startSession(t, ws)
	s.call(t, "probe:echo", map[string]any{"text": "warm"})
	first := containersOf(t, ws.Dir)[0].ID
	type answer struct {
		out string
		res *mcp.CallToolResult
	}
	done := make(chan answer, 1)
	go func() {
		out, res := s.call(t, "probe:sleep", map[string]any{"ms": 60000})
		done <- answer{out, res}
	}()
	time.Sleep(500 * time.Millisecond)
	if err := pool.Client.KillContainer(dc.KillContainerOptions{ID: first}); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if !a.res.IsError || !strings.Contains(a.out, "MCP server probe exited") {
		t.Errorf("the in-flight call after a kill: %q", a.out)
	}
	if out, res := s.call(t, "probe:echo", map[string]any{"text": "again"}); res.IsError || out != "again" {
		t.Errorf("the call after the crash: %q", out)
	}
	// The crash's stderr is quoted.
	out, res := s.call(t, "probe:crash", nil)
	if !res.IsError || !strings.Contains(out, "probe: crashing on request") || !strings.Contains(out, "exit code 3") {
		t.Errorf("crash report: %q", out)
	}
	if out, _ := s.call(t, "probe:echo", map[string]any{"text": "third"}); out != "third" {
		t.Errorf("after the second crash: %q", out)
	}
}

func TestAnIdleServerStopsAndRestarts(t *testing.T) {
	ws := newWorkspace(t, strings.Replace(probeConfig(t, ""), `"mcps"`, `"sandbox": {"idle_timeout": "1s"}, "mcps"`, 1))
	s := startSession(t, ws)
	s.call(t, "probe:echo", map[string]any{"text": "one"})
	waitFor(t, "the idle server to stop", 15*time.Second, func() bool { return len(containersOf(t, ws.Dir)) == 0 })
	if out, _ := s.call(t, "probe:echo", map[string]any{"text": "two"}); out != "two" {
		t.Errorf("after the idle stop: %q", out)
	}
}

func TestAMissingRequiredVariableIsNamed(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, `, "env_required": ["E2E_PML_TOKEN"]`))
	s := startSession(t, ws)
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "probe:echo", Arguments: map[string]any{"text": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if msg := text(res); !res.IsError || !strings.Contains(msg, "E2E_PML_TOKEN") || !strings.Contains(msg, ".env") {
		t.Errorf("missing env_required: %q", msg)
	}
	if n := len(containersOf(t, ws.Dir)); n != 0 {
		t.Errorf("%d containers started without the required variable", n)
	}
	ws.write(".env", "# test\nE2E_PML_TOKEN=\"from-dotenv\"\n")
	if out, _ := s.call(t, "probe:env", nil); !strings.Contains(out, "E2E_PML_TOKEN=from-dotenv") {
		t.Errorf("the variable from .env did not reach the server: %q", out)
	}
}

func TestRealGoSDKServers(t *testing.T) {
	needImage(t, everythingImage)
	needImage(t, memoryImage)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {
  "everything": {"image": %q},
  "kb": {"image": %q, "workspace": "none"}
}}`, everythingImage, memoryImage))
	s := startSession(t, ws)
	if out, res := s.call(t, "everything:greet", map[string]any{"name": "pml"}); res.IsError || !strings.Contains(out, "pml") {
		t.Errorf("everything:greet: %q", out)
	}
	if out, _ := s.call(t, "everything:roots", nil); !strings.Contains(out, "file://"+ws.Dir) {
		t.Errorf("roots/list did not answer the workspace: %q", out)
	}
	if _, res := s.call(t, "everything:ping", nil); res.IsError {
		t.Error("the server's ping to pml failed")
	}
	out, res := s.call(t, "kb:create_entities", map[string]any{"entities": []any{
		map[string]any{"name": "pml", "entityType": "project", "observations": []any{"runs MCP servers in containers"}},
	}})
	if res.IsError {
		t.Fatalf("kb:create_entities: %q", out)
	}
	// This server answers in structured content; pml passes it on.
	if _, res := s.call(t, "kb:read_graph", nil); !strings.Contains(structuredJSON(res), "runs MCP servers in containers") {
		t.Errorf("kb:read_graph: %s", structuredJSON(res))
	}
	if _, res := s.call(t, "kb:search_nodes", map[string]any{"query": "project"}); !strings.Contains(structuredJSON(res), `"pml"`) {
		t.Errorf("kb:search_nodes: %s", structuredJSON(res))
	}
}

func TestMark3labsFilesystemServer(t *testing.T) {
	needImage(t, fsServerImage)
	ws := newWorkspace(t, "")
	ws.write("notes/hello.txt", "hello from the workspace")
	ws.write(".pml.json", fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"fs": {"image": %q, "args": [%q]}}}`, fsServerImage, ws.Dir))
	s := startSession(t, ws)
	if out, res := s.call(t, "fs:read_file", map[string]any{"path": ws.path("notes/hello.txt")}); res.IsError || !strings.Contains(out, "hello from the workspace") {
		t.Errorf("fs:read_file: %q", out)
	}
	if out, _ := s.call(t, "fs:list_directory", map[string]any{"path": ws.path("notes")}); !strings.Contains(out, "hello.txt") {
		t.Errorf("fs:list_directory: %q", out)
	}
	// The mount is read-only: the server's own write fails.
	out, res := s.call(t, "fs:write_file", map[string]any{"path": ws.path("notes/new.txt"), "content": "x"})
	if !res.IsError && !strings.Contains(strings.ToLower(out), "read-only") {
		t.Errorf("a write through a read-only server succeeded: %q", out)
	}
	if _, err := os.Stat(ws.path("notes/new.txt")); err == nil {
		t.Error("the file was written through a read-only mount")
	}
}

func npmMemoryConfig(integrity string) string {
	return fmt.Sprintf(`{"permissions": {"allow": ["filesystem:*"]}, "mcps": {"memory": {
  "image": %q, "command": "node",
  "args": ["/deps/node_modules/@modelcontextprotocol/server-memory/dist/index.js"],
  "env": {"MEMORY_FILE_PATH": "/tmp/memory.json"}, "workspace": "none",
  "install": {"command": "npm", "args": ["install", "--prefix", "/deps", "--no-audit", "--no-fund", "@modelcontextprotocol/server-memory@2026.8.31"],
              "integrity": %q}
}}}`, nodeImage, integrity)
}

func TestAnNPMServerIsInstalledThroughApprovalAndIntegrity(t *testing.T) {
	needImage(t, nodeImage)
	ws := newWorkspace(t, npmMemoryConfig(npmMemoryIntegrity))
	s := startSession(t, ws)
	args := map[string]any{"entities": []any{map[string]any{"name": "pml", "entityType": "project", "observations": []any{"installed with approval"}}}}
	a := askFor2(t, s, "memory:create_entities", args, "dependency")
	if !strings.Contains(a.Description, "npm install") {
		t.Errorf("the dependency approval does not show the install command: %q", a.Description)
	}
	out, res := s.call(t, "pml:continue_workflow", cont(a.WorkflowID, true, false))
	if res.IsError {
		t.Fatalf("approved install + call: %q", out)
	}
	// Installed now: the next tool is asked as a plain tool permission.
	a = askFor2(t, s, "memory:read_graph", nil, "tool_permission")
	if out, _ := s.call(t, "pml:continue_workflow", cont(a.WorkflowID, true, true)); !strings.Contains(out, "installed with approval") {
		t.Errorf("memory:read_graph: %q", out)
	}
	raw, err := os.ReadFile(ws.path(".pml/deps.json"))
	if err != nil || !strings.Contains(string(raw), npmMemoryIntegrity) {
		t.Errorf(".pml/deps.json: %s %v", raw, err)
	}
	// npm reached its registry through pml's egress proxy (no bridge
	// network): the install's connections are audited.
	if audit := readAudit(t, ws); !strings.Contains(audit, `"tool":"install:memory","decision":"allowed"`) || !strings.Contains(audit, `"host":"registry.npmjs.org","port":443`) {
		t.Errorf("the install's registry connections are not in the audit log:\n%s", audit)
	}
	// The installed server is listed and works in a new session, with no
	// further approval (the run has network none).
	s2 := startSession(t, ws)
	if out, res := s2.call(t, "memory:read_graph", nil); res.IsError {
		t.Errorf("second session: %q", out)
	}
}

func TestAnIntegrityMismatchIsRefused(t *testing.T) {
	needImage(t, nodeImage)
	wrong := "sha512-" + strings.Repeat("A", 86) + "=="
	ws := newWorkspace(t, strings.Replace(npmMemoryConfig(wrong), `"allow": ["filesystem:*"]`, `"allow": ["memory:*"]`, 1))
	s := startSession(t, ws)
	out, res := s.call(t, "memory:read_graph", nil)
	if !res.IsError || !strings.Contains(out, "integrity mismatch") || !strings.Contains(out, wrong) || !strings.Contains(out, npmMemoryIntegrity) {
		t.Errorf("mismatch: %q", out)
	}
	if _, err := os.Stat(ws.path(".pml/deps/memory")); err == nil {
		t.Error("the mismatching install was kept")
	}
	if raw, _ := os.ReadFile(ws.path(".pml/deps.json")); strings.Contains(string(raw), "memory") {
		t.Errorf("the mismatching install was recorded: %s", raw)
	}
}

// askFor2 expects approval_required of the given type. For a tool with
// an output schema (the npm memory server's read_graph) pml's approval
// comes as an error result with its text alone (a client would check
// structured content against the tool's schema): read from the text.
func askFor2(t *testing.T, s *session, tool string, args map[string]any, typ string) approval {
	t.Helper()
	out, res := s.call(t, tool, args)
	var a approval
	if res.IsError && res.StructuredContent == nil {
		if m := approvalInText.FindStringSubmatch(out); m != nil {
			a = approval{ApprovalRequired: true, ApprovalType: m[1], WorkflowID: m[2], Description: out}
			res.IsError = false
		}
	} else {
		structured(t, res, &a)
	}
	if res.IsError || !a.ApprovalRequired || a.ApprovalType != typ {
		t.Fatalf("expected a %s approval for %s, got %q", typ, tool, out)
	}
	b, _ := json.Marshal(a)
	t.Logf("approval: %s", b)
	return a
}

// approvalInText reads an approval's type and workflow_id from its text
// (broker/approve/approval_text.go).
var approvalInText = regexp.MustCompile(`(?s)^Approval required \(([a-z_]+)\):.*?"workflow_id": "([0-9a-f-]+)"`)

func structuredJSON(res *mcp.CallToolResult) string {
	b, _ := json.Marshal(res.StructuredContent)
	return string(b)
}

// TestServerRequestsAreRelayed: a server's elicitation and sampling
// requests reach a client that supports them, and are refused clearly
// for one that does not.
func TestServerRequestsAreRelayed(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"everything": {"image": %q}}}`, everythingImage))
	client := mcp.NewClient(&mcp.Implementation{Name: "relay", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"random": "chosen-by-the-user"}}, nil
		},
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: "sampled-by-the-client"}}, nil
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: execPML(ws, "stdio")}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if out, res := callC(t, cs, "everything:elicit (form)", nil); res.IsError || out != "chosen-by-the-user" {
		t.Errorf("elicitation relay: %q", out)
	}
	if out, res := callC(t, cs, "everything:sample", nil); res.IsError || out != "sampled-by-the-client" {
		t.Errorf("sampling relay: %q", out)
	}
	// A client without those capabilities gets a clear refusal.
	s := startSession(t, ws)
	if out, res := s.call(t, "everything:sample", nil); !res.IsError || !strings.Contains(out, "does not support sampling") {
		t.Errorf("sampling without client support: %q", out)
	}
}

// TestAServersListChangedIsPassedOn: a server that adds a tool at run time
// sends tools/list_changed; pml refreshes its list and tells its client.
func TestAServersListChangedIsPassedOn(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, ""))
	var notified sync.WaitGroup
	notified.Add(1)
	var once sync.Once
	client := mcp.NewClient(&mcp.Implementation{Name: "lc", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(ctx context.Context, req *mcp.ToolListChangedRequest) { once.Do(notified.Done) },
	})
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: execPML(ws, "stdio")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if out, res := callC(t, cs, "probe:add_tool", nil); res.IsError {
		t.Fatalf("add_tool: %q", out)
	}
	deadline := time.After(10 * time.Second)
	for {
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, tool := range tools.Tools {
			found = found || pmlName(tool.Name) == "probe:dynamic"
		}
		if found {
			break
		}
		select {
		case <-deadline:
			t.Fatal("probe:dynamic never appeared in pml's tools/list")
		case <-time.After(200 * time.Millisecond):
		}
	}
	// A new tool of a server whose tools are pinned is held until the
	// person accepts it (issue 56); then it runs.
	_, res := callC(t, cs, "probe:dynamic", nil)
	var a approval
	structured(t, res, &a)
	if a.ApprovalType != "tool_change" {
		t.Fatalf("probe:dynamic was not held as a new tool: %+v", a)
	}
	if out, _ := callC(t, cs, "probe:dynamic", map[string]any{"continue_workflow": cont(a.WorkflowID, true, false)}); out != "dynamic answer" {
		t.Errorf("probe:dynamic: %q", out)
	}
	done := make(chan struct{})
	go func() { notified.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("the client was not sent notifications/tools/list_changed")
	}
}

// TestAnUnreachableRegistryIsAClearError points the install at a registry
// on the install container's own loopback, where nothing listens.
func TestAnUnreachableRegistryIsAClearError(t *testing.T) {
	needImage(t, nodeImage)
	cfg := strings.Replace(npmMemoryConfig(npmMemoryIntegrity), `"--no-fund",`, `"--no-fund", "--registry", "http://127.0.0.1:9/", "--fetch-retries", "0",`, 1)
	cfg = strings.Replace(cfg, `"allow": ["filesystem:*"]`, `"allow": ["memory:*"]`, 1)
	ws := newWorkspace(t, cfg)
	s := startSession(t, ws)
	out, res := s.call(t, "memory:read_graph", nil)
	if !res.IsError || !strings.Contains(out, "could not be reached") {
		t.Errorf("unreachable registry: %q", out)
	}
	if _, err := os.Stat(ws.path(".pml/deps/memory")); err == nil {
		t.Error("a failed install left its cache")
	}
}
