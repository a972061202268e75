package broker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
	"github.com/pml-dev/pml/internal/inside"
	"github.com/pml-dev/pml/internal/toolbox"
)

// inProcess is the shared fake runtime (internal/container/containertest)
// playing pml's containers in goroutines on the host: the toolbox agent,
// the shell, an MCP server and the Deno runner. The broker's request path
// (permissions, approvals, audit) is tested here without Docker; e2e/
// covers the real containers.
type inProcess struct {
	// fail, when set, is what Start returns (an unavailable runtime);
	// hang makes every container start and never answer (a timeout).
	fail error
	hang bool

	containertest.Runtime
	once sync.Once
	mu   sync.Mutex
	// served counts containers that received a request: calls that ran.
	// (Containers started counts pool pre-starts too.)
	served int
}

// Start sets the fake up from fail and hang on first use, so a test
// builds an inProcess as a plain literal.
func (r *inProcess) Start(ctx context.Context, spec container.Spec, s container.Streams) (container.Process, error) {
	r.once.Do(func() {
		r.StartErr = r.fail
		if !r.hang {
			r.Behave = r.behave
		}
	})
	return r.Runtime.Start(ctx, spec, s)
}

// behave picks the program a container runs by its purpose label.
func (r *inProcess) behave(p *containertest.Proc) int {
	purpose := p.Spec.Labels[container.LabelPurpose]
	switch {
	case strings.HasPrefix(purpose, "mcp:") || strings.HasPrefix(purpose, "pool:mcp:"):
		return r.mcpServer(p)
	case strings.Contains(purpose, "execute"):
		return r.deno(p)
	case purpose == "pool:shell":
		return r.shell(p)
	}
	return r.toolboxAgent(p)
}

func (r *inProcess) serve() {
	r.mu.Lock()
	r.served++
	r.mu.Unlock()
}

// toolboxAgent runs the real toolbox agent on the container's stdin.
func (r *inProcess) toolboxAgent(p *containertest.Proc) int {
	in := bufio.NewReader(p.In)
	if _, err := in.Peek(1); err == nil {
		r.serve()
	}
	_ = toolbox.Serve(context.Background(), in, p.Out)
	_, _ = io.Copy(io.Discard, in)
	return 0
}

// mcpServer plays an MCP server's container: its tools are echo (says
// its text back) and boom (a tool error).
func (r *inProcess) mcpServer(p *containertest.Proc) int {
	r.serve()
	srv := mcp.NewServer(&mcp.Implementation{Name: "fake"}, nil)
	schema := json.RawMessage(`{"type": "object"}`)
	srv.AddTool(&mcp.Tool{Name: "echo", Description: "says it back", InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ Text string }
		_ = json.Unmarshal(req.Params.Arguments, &args)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + args.Text}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "boom", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "boom"}}}, nil
	})
	// The container lives until it is killed (its stdin ends).
	_ = srv.Run(context.Background(), &mcp.IOTransport{Reader: io.NopCloser(p.In), Writer: nopWriteCloser{p.Out}})
	return 0
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// deno plays the Deno runner of pml:execute. Its "code" is one line per
// tool call, "TOOL {json arguments}"; it makes them one at a time and
// ends with the results' texts, in order, as its result.
func (r *inProcess) deno(p *containertest.Proc) int {
	in := bufio.NewReader(p.In)
	var run struct {
		Params struct{ Code, Module string }
	}
	first, err := in.ReadBytes('\n')
	if err != nil || json.Unmarshal(first, &run) != nil {
		return 0
	}
	if run.Params.Code == "" { // a deno capability's module plays the same
		run.Params.Code = run.Params.Module
	}
	var results []string
	for i, line := range strings.Split(strings.TrimSpace(run.Params.Code), "\n") {
		tool, args, _ := strings.Cut(line, " ")
		call, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
			"params": map[string]any{"name": tool, "arguments": json.RawMessage(args)}})
		fmt.Fprintf(p.Out, "%s\n", call)
		reply, err := in.ReadBytes('\n')
		if err != nil {
			return 0
		}
		var res struct {
			Result *mcp.CallToolResult
			Error  *struct{ Message string }
		}
		_ = json.Unmarshal(reply, &res)
		switch {
		case res.Error != nil:
			results = append(results, "refused: "+res.Error.Message)
		case res.Result != nil && len(res.Result.Content) > 0:
			results = append(results, res.Result.Content[0].(*mcp.TextContent).Text)
		}
	}
	done, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "pml/done", "params": map[string]any{"status": "success", "result": results}})
	fmt.Fprintf(p.Out, "%s\n", done)
	_, _ = io.Copy(io.Discard, in)
	return 0
}

// shell plays a shell container: it reads "cwd\ncommand" and echoes
// both; "fail" in the command exits 3, "loud" writes to stderr too.
func (r *inProcess) shell(p *containertest.Proc) int {
	in, _ := io.ReadAll(p.In)
	r.serve()
	cwd, cmd, _ := strings.Cut(string(in), "\n")
	fmt.Fprintf(p.Out, "in %s ran %s", cwd, cmd)
	if strings.Contains(cmd, "loud") {
		fmt.Fprint(p.Err, "complaint")
	}
	if strings.Contains(cmd, "fail") {
		return 3
	}
	return 0
}

func (r *inProcess) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.served
}

type fixture struct {
	ws string
	b  *Broker
	rt *inProcess
	wf *workflow.Workflows
}

func newFixture(t testing.TB, pmlJSON string) *fixture {
	t.Helper()
	return newFixtureOn(t, pmlJSON, &inProcess{})
}

// newFixtureOn builds a fixture on rt.
func newFixtureOn(t testing.TB, pmlJSON string, rt *inProcess) *fixture {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if pmlJSON != "" {
		if err := os.WriteFile(filepath.Join(ws, ".pml.json"), []byte(pmlJSON), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	return newBrokerIn(t, ws, rt)
}

// newFixtureIn builds a second broker on an existing workspace.
func newFixtureIn(t testing.TB, ws string) *fixture {
	t.Helper()
	return newBrokerIn(t, ws, &inProcess{})
}

// testInside stands for pml's in-container program: the fake runtime
// runs the agent in-process, so only the toolbox tag is read from it. Its
// path is no executable at all, so shell and Deno get no supervisor
// however the test binary was linked (a static one, CGO_ENABLED=0 as make
// test builds it, would pass for the program).
func testInside(context.Context) (inside.Program, error) {
	return inside.Program{Arch: runtime.GOARCH, Path: os.DevNull, Digest: strings.Repeat("0", 64)}, nil
}

func newBrokerIn(t testing.TB, ws string, rt *inProcess) *fixture {
	t.Helper()
	cfg, err := config.Load(ws, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Workspace: ws, Config: cfg, Runtime: rt, Inside: testInside, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(time.Second) })
	return &fixture{ws: ws, b: b, rt: rt, wf: workflow.NewWorkflows(cfg.HIL.Timeout)}
}

func (f *fixture) call(t *testing.T, tool string, args any) call.Result {
	t.Helper()
	raw, _ := json.Marshal(args)
	return f.b.Call(context.Background(), call.Request{Tool: tool, Args: raw, Workflows: f.wf})
}

func approvalOf(t *testing.T, r call.Result) workflow.Approval {
	t.Helper()
	a, ok := r.Structured.(workflow.Approval)
	if !ok || r.IsError {
		t.Fatalf("expected approval_required, got %+v", r)
	}
	return a
}

func TestAskReturnsApprovalAndRunsNothing(t *testing.T) {
	f := newFixture(t, "")
	r := f.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"})
	a := approvalOf(t, r)
	if !a.ApprovalRequired || a.ApprovalType != workflow.ApprovalToolPermission || a.Tool != "filesystem:write_file" ||
		len(a.Options) != 3 || a.Arguments["path"] != "b.txt" || a.Description == "" || time.Until(a.ExpiresAt) < 4*time.Minute {
		t.Fatalf("approval: %+v", a)
	}
	if len(a.WorkflowID) != 36 || a.WorkflowID[14] != '4' {
		t.Fatalf("workflow id %q is not a UUID v4", a.WorkflowID)
	}
	if !strings.Contains(r.Text, a.WorkflowID) || !strings.Contains(r.Text, "continue_workflow") {
		t.Fatalf("text does not explain how to answer: %s", r.Text)
	}
	if f.rt.count() != 0 {
		t.Fatal("a container started for an unapproved call")
	}
	if _, err := os.Stat(filepath.Join(f.ws, "b.txt")); !os.IsNotExist(err) {
		t.Fatal("the file was written")
	}
}

func TestApproveRunsStoredArguments(t *testing.T) {
	f := newFixture(t, "")
	a := approvalOf(t, f.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "stored"}))
	// The resent arguments differ: the stored ones win.
	r := f.call(t, "filesystem:write_file", map[string]any{"path": "evil.txt", "content": "changed",
		"continue_workflow": map[string]any{"workflow_id": a.WorkflowID, "approved": true}})
	if r.IsError {
		t.Fatalf("approved call failed: %s", r.Text)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "b.txt")); string(b) != "stored" {
		t.Fatalf("b.txt = %q", b)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "evil.txt")); !os.IsNotExist(err) {
		t.Fatal("the resent arguments were used")
	}
	// Used once.
	r = f.call(t, call.ContinueTool, map[string]any{"workflow_id": a.WorkflowID, "approved": true})
	if !r.IsError || !strings.Contains(r.Text, "already answered") {
		t.Fatalf("reuse: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(f.ws, ".pml.json")); !os.IsNotExist(err) {
		t.Fatal("a one-time approval wrote .pml.json")
	}
}

func TestRejectDifferentToolUnknownExpired(t *testing.T) {
	f := newFixture(t, "")
	a := approvalOf(t, f.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"}))
	r := f.call(t, "filesystem:create_directory", map[string]any{"path": "d",
		"continue_workflow": map[string]any{"workflow_id": a.WorkflowID, "approved": true}})
	if !r.IsError || !strings.Contains(r.Text, "belongs to filesystem:write_file") {
		t.Fatalf("different tool: %+v", r)
	}
	r = f.call(t, call.ContinueTool, map[string]any{"workflow_id": a.WorkflowID, "approved": false})
	if !r.IsError || !strings.Contains(r.Text, "Rejected") {
		t.Fatalf("reject: %+v", r)
	}
	for _, name := range []string{"b.txt", "d"} {
		if _, err := os.Stat(filepath.Join(f.ws, name)); !os.IsNotExist(err) {
			t.Fatalf("%s exists after a refusal", name)
		}
	}
	r = f.call(t, call.ContinueTool, map[string]any{"workflow_id": "00000000-0000-4000-8000-000000000000", "approved": true})
	if !r.IsError || !strings.Contains(r.Text, "unknown workflow") {
		t.Fatalf("unknown: %+v", r)
	}
	r = f.call(t, call.ContinueTool, map[string]any{"approved": true})
	if !r.IsError || !strings.Contains(r.Text, "continue_workflow must be") {
		t.Fatalf("malformed continuation: %+v", r)
	}

	a = approvalOf(t, f.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"}))
	f.wf.SetClock(func() time.Time { return time.Now().Add(6 * time.Minute) })
	r = f.call(t, call.ContinueTool, map[string]any{"workflow_id": a.WorkflowID, "approved": true})
	if !r.IsError || !strings.Contains(r.Text, "expired") {
		t.Fatalf("expired: %+v", r)
	}
	if f.rt.count() != 0 {
		t.Fatal("a refused continuation started a container")
	}
}

func TestDenyNamesThePattern(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["*"], "deny": ["filesystem:write_*"]}}`)
	r := f.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"})
	if !r.IsError || !strings.Contains(r.Text, `"filesystem:write_*"`) || !strings.Contains(r.Text, ".pml.json") {
		t.Fatalf("deny: %+v", r)
	}
	r = f.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
	if r.IsError || r.Text != "hello" {
		t.Fatalf("allowed read: %+v", r)
	}
}

func TestAlwaysKeepsTheFileAndAppliesAtOnce(t *testing.T) {
	orig := "{\n  \"zeta\": {\"keep\": [1, 2]},\n  \"permissions\": {\n    \"allow\": [\"filesystem:read_*\"],\n    \"ask\": [\"*\"]\n  },\n  \"unknown_key\": true\n}\n"
	f := newFixture(t, orig)
	a := approvalOf(t, f.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"}))
	r := f.call(t, call.ContinueTool, map[string]any{"workflow_id": a.WorkflowID, "approved": true, "always": true})
	if r.IsError {
		t.Fatal(r.Text)
	}
	data, _ := os.ReadFile(filepath.Join(f.ws, ".pml.json"))
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	allow := doc["permissions"].(map[string]any)["allow"].([]any)
	if len(allow) != 2 || allow[1] != "filesystem:write_file" || doc["unknown_key"] != true || doc["zeta"] == nil {
		t.Fatalf(".pml.json after always:\n%s", data)
	}
	if !strings.HasPrefix(string(data), "{\n  \"zeta\"") {
		t.Fatalf("key order or indentation changed:\n%s", data)
	}
	// The next call runs without asking.
	r = f.call(t, "filesystem:write_file", map[string]any{"path": "c.txt", "content": "y"})
	if r.IsError || r.Structured != nil {
		t.Fatalf("after always: %+v", r)
	}
}

func TestAlwaysThatCannotBeSavedDoesNotRun(t *testing.T) {
	f := newFixture(t, `{"permissions": {"ask": ["*"]}}`)
	a := approvalOf(t, f.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"}))
	// A directory where the config lock belongs: it cannot be taken,
	// whatever the uid (root included), while the audit log (beside it)
	// takes the call's entry.
	lock := filepath.Join(f.ws, ".pml", "config.lock")
	if err := os.RemoveAll(lock); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(lock, 0o700); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(f.ws, ".pml.json"))
	r := f.call(t, call.ContinueTool, map[string]any{"workflow_id": a.WorkflowID, "approved": true, "always": true})
	if !r.IsError || !strings.Contains(r.Text, "could not remember") || !strings.Contains(r.Text, "not run") {
		t.Fatalf("unsaved always: %+v", r)
	}
	if f.rt.count() != 0 {
		t.Fatal("the call ran although always was not saved")
	}
	if after, _ := os.ReadFile(filepath.Join(f.ws, ".pml.json")); string(after) != string(before) {
		t.Fatalf(".pml.json changed:\n%s", after)
	}
	// The workflow can be answered again, once.
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	r = f.call(t, call.ContinueTool, map[string]any{"workflow_id": a.WorkflowID, "approved": true})
	if r.IsError || f.rt.count() != 1 {
		t.Fatalf("second answer: %+v (containers %d)", r, f.rt.count())
	}
}

// TestConcurrentAlwaysForTwentyTools answers 20 approvals for 20 different
// tools at once; every name must end up in permissions.allow.
func TestConcurrentAlwaysForTwentyTools(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": [], "ask": ["*"]}, "other": "kept"}`)
	var names []string
	for i := 0; i < 20; i++ {
		def := toolbox.Filesystem[0]
		def.Name = fmt.Sprintf("test:tool_%02d", i)
		f.b.srv.Table.Add(def, tl.ExecutorFunc(func(context.Context, *call.Call, toolbox.Tool, map[string]any) call.Result {
			return call.Result{Text: "ran"}
		}))
		names = append(names, def.Name)
	}
	ids := make([]string, len(names))
	for i, n := range names {
		ids[i] = approvalOf(t, f.call(t, n, map[string]any{"path": "x"})).WorkflowID
	}
	var wg sync.WaitGroup
	errs := make(chan string, len(names))
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := f.call(t, n, map[string]any{"continue_workflow": map[string]any{"workflow_id": ids[i], "approved": true, "always": true}})
			if r.IsError || r.Text != "ran" {
				errs <- n + ": " + r.Text
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	cfg, err := config.Load(f.ws, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, a := range cfg.Permissions.Allow {
		got[a] = true
	}
	for _, n := range names {
		if !got[n] {
			t.Errorf("%s missing from permissions.allow: %v", n, cfg.Permissions.Allow)
		}
	}
	if cfg.Raw["other"] != "kept" {
		t.Errorf("other key lost: %v", cfg.Raw)
	}
}

func TestElicitation(t *testing.T) {
	for _, c := range []struct {
		choice  string
		ok      bool
		written bool
		saved   bool
	}{
		{"continue", true, true, false},
		{"always", true, true, true},
		{"abort", true, false, false},
		{"", false, false, false}, // declined: approval_required instead
	} {
		t.Run(c.choice, func(t *testing.T) {
			f := newFixture(t, "")
			var asked workflow.Approval
			raw, _ := json.Marshal(map[string]any{"path": "b.txt", "content": "x"})
			r := f.b.Call(context.Background(), call.Request{Tool: "filesystem:write_file", Args: raw, Workflows: f.wf,
				Ask: func(_ context.Context, a workflow.Approval) (string, bool) { asked = a; return c.choice, c.ok }})
			if asked.WorkflowID == "" {
				t.Fatal("the human was not asked")
			}
			_, err := os.Stat(filepath.Join(f.ws, "b.txt"))
			if (err == nil) != c.written {
				t.Fatalf("written=%v, want %v (result %+v)", err == nil, c.written, r)
			}
			_, err = os.Stat(filepath.Join(f.ws, ".pml.json"))
			if (err == nil) != c.saved {
				t.Fatalf(".pml.json saved=%v, want %v", err == nil, c.saved)
			}
			if !c.ok {
				if approvalOf(t, r).WorkflowID != asked.WorkflowID {
					t.Fatal("the fallback approval has another workflow id")
				}
			}
		})
	}
}

func TestAuditHasNoArgumentValues(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["filesystem:read_file"], "deny": ["shell:*"]}}`)
	f.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
	f.call(t, "shell:exec", map[string]any{"command": "echo TOPSECRET"})
	f.call(t, "filesystem:read_file", map[string]any{"path": "../TOPSECRET"})
	data, err := os.ReadFile(filepath.Join(f.ws, ".pml", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "TOPSECRET") || strings.Contains(string(data), "a.txt") {
		t.Fatalf("argument values in the audit log:\n%s", data)
	}
	for _, want := range []string{`"allowed"`, `"denied"`, `"path_blocked"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("no %s line:\n%s", want, data)
		}
	}
	st, _ := os.Stat(filepath.Join(f.ws, ".pml", "audit.jsonl"))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("audit mode %v", st.Mode().Perm())
	}
}

// FuzzCall sends arbitrary tool names and argument bytes down the request
// path: it must never panic, never run an unapproved write, and always
// answer with text.
func FuzzCall(f *testing.F) {
	for _, s := range [][2]string{
		{"filesystem:read_file", `{"path":"a.txt"}`},
		{"filesystem:read_file", `{"path":"../../etc/passwd"}`},
		{"filesystem:write_file", `{"path":"x","content":"y"}`},
		{"filesystem:write_file", `{"path":"x","content":"y","continue_workflow":{"workflow_id":"nope","approved":true}}`},
		{"pml:continue_workflow", `{"workflow_id":"","approved":true}`},
		{"filesystem:read_multiple_files", `{"paths":["a.txt",7,null]}`},
		{"shell:exec", `[1,2]`},
		{"", `null`},
		{"filesystem:edit_file", `{"path":"a.txt","edits":[{"oldText":"h","newText":"j"}]}`},
	} {
		f.Add(s[0], []byte(s[1]))
	}
	fx := newFixture(f, `{"permissions": {"allow": ["filesystem:read_*", "filesystem:get_file_info"], "ask": ["*"]}}`)
	f.Fuzz(func(t *testing.T, tool string, args []byte) {
		r := fx.b.Call(context.Background(), call.Request{Tool: tool, Args: args, Workflows: fx.wf})
		if r.Text == "" {
			t.Fatalf("Call(%q, %q) answered without text: %+v", tool, args, r)
		}
		if b, _ := os.ReadFile(filepath.Join(fx.ws, "a.txt")); string(b) != "hello" {
			t.Fatalf("Call(%q, %q) changed a.txt to %q", tool, args, b)
		}
	})
}
