package execute

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/policies"
)

func testRunner(rt container.Runtime) *Runner {
	return &Runner{Runtime: rt, Policy: policies.Default(), User: "1000:1000", Timeout: time.Minute}
}

// start starts code on a fake runtime and reads the first message.
func start(t *testing.T, r *Runner, f *fakeRuntime, code string) (*Run, *fakeProc) {
	t.Helper()
	run, err := r.Start(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(run.Kill)
	p := f.proc(t)
	first := p.recv(t)
	params, _ := first["params"].(map[string]any)
	if first["method"] != "pml/run" || params["code"] != code {
		t.Fatalf("first message = %v, want pml/run with the code", first)
	}
	return run, p
}

func nextEvent(t *testing.T, run *Run) (Event, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return run.Next(ctx)
}

func mustCall(t *testing.T, run *Run) Call {
	t.Helper()
	ev, err := nextEvent(t, run)
	c, ok := ev.(Call)
	if err != nil || !ok {
		t.Fatalf("Next = %#v, %v; want a call", ev, err)
	}
	return c
}

// waitRemoved waits until the run has removed p's container, which it does
// once it has seen the end.
func waitRemoved(t *testing.T, p *fakeProc) {
	t.Helper()
	select {
	case <-p.removedC:
	case <-time.After(10 * time.Second):
		t.Fatal("the container was not removed")
	}
}

func TestSpecLocksTheContainerDown(t *testing.T) {
	t.Setenv("PML_TEST_SECRET", "s3cret")
	f := newFakeRuntime()
	r := testRunner(f)
	// A careless policy: the runner must not take these from it.
	r.Policy.Network = "bridge"
	r.Policy.ReadOnlyRootfs = false
	r.Policy.NoNewPrivileges = false
	r.Policy.Tmpfs = nil
	r.Policy.Resources.Memory = "512m"
	r.Labels = map[string]string{container.LabelWorkspace: "/ws"}
	start(t, r, f, "return 1")
	s := f.lastSpec()

	if s.Policy.Network != "none" || !s.Policy.ReadOnlyRootfs || !s.Policy.NoNewPrivileges {
		t.Errorf("policy = %+v: want network none, read-only rootfs, no-new-privileges", s.Policy)
	}
	if _, ok := s.Policy.Tmpfs["/tmp"]; !ok {
		t.Errorf("no tmpfs /tmp: %v", s.Policy.Tmpfs)
	}
	if len(s.Mounts) != 0 {
		t.Errorf("mounts = %v, want none", s.Mounts)
	}
	if s.User != "1000:1000" || s.Image != DefaultImage {
		t.Errorf("user %q image %q", s.User, s.Image)
	}
	if !reflect.DeepEqual(s.Entrypoint, []string{"deno"}) || len(s.Cmd) < 2 || s.Cmd[0] != "run" {
		t.Fatalf("command = %v %v", s.Entrypoint, s.Cmd)
	}
	for _, a := range s.Cmd {
		if strings.HasPrefix(a, "--allow") || a == "-A" {
			t.Errorf("the command grants a permission: %s", a)
		}
	}
	for _, want := range []string{"--no-prompt", "--no-remote", "--no-npm", "--v8-flags=--max-old-space-size=384"} {
		if !slices.Contains(s.Cmd, want) {
			t.Errorf("the command lacks %s: %v", want, s.Cmd[:len(s.Cmd)-1])
		}
	}
	main := s.Cmd[len(s.Cmd)-1]
	b64, ok := strings.CutPrefix(main, "data:application/typescript;base64,")
	if !ok {
		t.Fatalf("the main module is %.60s…, want the runner as a data: URL", main)
	}
	if src, err := base64.StdEncoding.DecodeString(b64); err != nil || string(src) != string(runnerSource) {
		t.Errorf("the main module is not runner.ts (%v)", err)
	}
	for _, e := range s.Env {
		if strings.Contains(e, "s3cret") {
			t.Errorf("pml's environment reached the container: %s", e)
		}
	}
	if !slices.Contains(s.Env, "DENO_DIR=/tmp/deno") {
		t.Errorf("env = %v, want DENO_DIR on the tmpfs", s.Env)
	}
	l := s.Labels
	if l[container.LabelManaged] != "true" || l[container.LabelPurpose] != Purpose || l[container.LabelWorkspace] != "/ws" ||
		l[container.LabelOwnerPID] != fmt.Sprint(os.Getpid()) {
		t.Errorf("labels = %v", l)
	}
}

func TestStartRefusesBadInputAndStartsNothing(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Runner)
		prog Program
		want string
	}{
		{"empty code", nil, Program{}, "no code"},
		{"blank code", nil, Program{Code: " \n\t"}, "blank"},
		{"code and module", nil, Program{Code: "1", Module: "export {}"}, "not both"},
		{"too large", nil, Program{Code: strings.Repeat("x", MaxCode+1)}, "limit"},
		{"root user", func(r *Runner) { r.User = "0:0" }, Program{Code: "1"}, "root"},
		{"no user", func(r *Runner) { r.User = "" }, Program{Code: "1"}, "no container user"},
		{"bad policy", func(r *Runner) { r.Policy.Resources.Memory = "lots" }, Program{Code: "1"}, "memory"},
		{"args not JSON", nil, Program{Module: "export {}", Export: "f", Args: map[string]any{"c": make(chan int)}}, "not JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeRuntime()
			r := testRunner(f)
			if c.edit != nil {
				c.edit(r)
			}
			_, err := r.StartProgram(context.Background(), c.prog)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, c.want)
			}
			if f.started() != 0 {
				t.Fatal("a container was started for a refused program")
			}
		})
	}
}

func TestStartWithoutTheImageSaysHowToGetIt(t *testing.T) {
	f := newFakeRuntime()
	f.startErr = fmt.Errorf("creating container: %w", container.ErrImageMissing)
	_, err := testRunner(f).Start(context.Background(), "return 1")
	if !errors.Is(err, container.ErrImageMissing) || !strings.Contains(err.Error(), "pml images pull --all") || strings.Contains(err.Error(), "make ") {
		t.Fatalf("err = %v", err)
	}
}

func TestCallsAreDeliveredAndAnsweredInAnyOrder(t *testing.T) {
	f := newFakeRuntime()
	run, p := start(t, testRunner(f), f, "…")
	p.send(
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fs:read","arguments":{"path":"a"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fs:write"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"calc:add","arguments":{"a":1,"b":2}}}`,
	)
	want := []Call{
		{ID: 1, Tool: "fs:read", Args: map[string]any{"path": "a"}},
		{ID: 2, Tool: "fs:write", Args: map[string]any{}},
		{ID: 3, Tool: "calc:add", Args: map[string]any{"a": 1.0, "b": 2.0}},
	}
	for _, w := range want {
		if c := mustCall(t, run); !reflect.DeepEqual(c, w) {
			t.Fatalf("call = %+v, want %+v", c, w)
		}
	}
	if err := run.Reply(3, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "3"}}}); err != nil {
		t.Fatal(err)
	}
	if err := run.Fail(2, "fs:write is denied"); err != nil {
		t.Fatal(err)
	}
	if err := run.Reply(1, &mcp.CallToolResult{StructuredContent: map[string]any{"text": "A"}}); err != nil {
		t.Fatal(err)
	}
	m3, m2, m1 := p.recv(t), p.recv(t), p.recv(t)
	if m3["id"] != 3.0 || m3["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"] != "3" {
		t.Errorf("answer 3 = %v", m3)
	}
	if e, _ := m2["error"].(map[string]any); m2["id"] != 2.0 || e["message"] != "fs:write is denied" || e["code"] != float64(codeToolFailed) {
		t.Errorf("answer 2 = %v", m2)
	}
	if m1["id"] != 1.0 || m1["result"].(map[string]any)["structuredContent"].(map[string]any)["text"] != "A" {
		t.Errorf("answer 1 = %v", m1)
	}
	for _, id := range []int64{1, 99} {
		if err := run.Reply(id, &mcp.CallToolResult{}); err == nil || !strings.Contains(err.Error(), "no such call") {
			t.Errorf("Reply(%d) = %v, want no such call", id, err)
		}
	}
	if err := run.Reply(4, nil); err == nil {
		t.Error("a nil result was accepted")
	}
}

// Fifty answers from fifty goroutines arrive whole: one JSON line each.
func TestConcurrentRepliesDoNotInterleave(t *testing.T) {
	f := newFakeRuntime()
	run, p := start(t, testRunner(f), f, "…")
	const n = 50
	big := strings.Repeat("x", 100<<10)
	for i := 1; i <= n; i++ {
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t:x"}}`, i))
	}
	var calls []Call
	for len(calls) < n {
		calls = append(calls, mustCall(t, run))
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, c := range calls {
		wg.Add(1)
		go func(c Call) {
			defer wg.Done()
			errs <- run.Reply(c.ID, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(c.ID, big)}}})
		}(c)
	}
	seen := map[float64]bool{}
	for i := 0; i < n; i++ {
		m := p.recv(t)
		id := m["id"].(float64)
		text := m["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string)
		if seen[id] || text != fmt.Sprint(id, big) {
			t.Fatalf("answer %v is duplicated or not its own", id)
		}
		seen[id] = true
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// What the code sends that is not a valid call is answered with an error
// (or, when not JSON, kept with stderr) and never reaches the broker.
func TestBadRequestsAreAnsweredNotDelivered(t *testing.T) {
	f := newFakeRuntime()
	run, p := start(t, testRunner(f), f, "…")
	p.send(
		`this is not json`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x:y"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"arguments":{}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"x:y","arguments":[1]}}`,
		`{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"x:y"}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"x:dup"}}`,
		`{"jsonrpc":"2.0","id":9,"result":{}}`,
	)
	errorsFor := map[string]string{}
	for i := 0; i < 5; i++ {
		m := p.recv(t)
		e, ok := m["error"].(map[string]any)
		if !ok {
			t.Fatalf("expected an error answer, got %v", m)
		}
		errorsFor[fmt.Sprint(m["id"])] = e["message"].(string)
	}
	for id, want := range map[string]string{"a": "integer", "5": "needs params", "6": "JSON object", "7": "only tools/call", "8": "already waiting"} {
		if !strings.Contains(errorsFor[id], want) {
			t.Errorf("answer to %s = %q, want one mentioning %q", id, errorsFor[id], want)
		}
	}
	if c := mustCall(t, run); c.ID != 8 || c.Tool != "x:y" {
		t.Fatalf("call = %+v, want only the first call 8", c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if ev, err := run.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a bad request was delivered: %#v %v", ev, err)
	}
	if !strings.Contains(run.Stderr(10), "stdout: this is not json") {
		t.Errorf("stderr tail = %q, want the stray stdout line", run.Stderr(10))
	}
}

// The Done is the last event; calls queued behind it are dropped, later
// answers refused, and the container is removed without a Kill.
func TestDoneEndsTheRun(t *testing.T) {
	f := newFakeRuntime()
	run, p := start(t, testRunner(f), f, "…")
	p.send(
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t:x"}}`,
		`{"jsonrpc":"2.0","method":"pml/done","params":{"status":"error","result":null,"error":"Error: boom","tool_failures":[{"tool":"t:y","error":"denied"}]}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t:after"}}`,
	)
	ev, err := nextEvent(t, run)
	want := Done{Status: "error", Result: json.RawMessage("null"), Error: "Error: boom", ToolFailures: []ToolFailure{{Tool: "t:y", Error: "denied"}}}
	if err != nil || !reflect.DeepEqual(ev, want) {
		t.Fatalf("Next = %#v, %v; want %#v", ev, err, want)
	}
	if _, err := nextEvent(t, run); !errors.Is(err, ErrFinished) {
		t.Fatalf("Next after Done = %v, want ErrFinished", err)
	}
	if err := run.Reply(1, &mcp.CallToolResult{}); !errors.Is(err, ErrFinished) {
		t.Fatalf("Reply after Done = %v, want ErrFinished", err)
	}
	waitRemoved(t, p)
	p.exit <- 0 // the runner exits after Done: not an error
	if _, err := nextEvent(t, run); !errors.Is(err, ErrFinished) {
		t.Fatalf("Next after the exit = %v, want ErrFinished", err)
	}
}

func TestExitWithoutDoneNamesTheCodeAndStderr(t *testing.T) {
	f := newFakeRuntime()
	run, p := start(t, testRunner(f), f, "…")
	p.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t:x"}}`)
	_, _ = p.stderr.Write([]byte("first line\nerror: Uncaught boom\n"))
	p.exit <- 3
	waitRemoved(t, p)
	// The queued call is not delivered: it can no longer be answered.
	_, err := nextEvent(t, run)
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "exit code 3") || !strings.Contains(err.Error(), "error: Uncaught boom") {
		t.Fatalf("Next = %v", err)
	}
	if err := run.Reply(1, &mcp.CallToolResult{}); !errors.Is(err, ErrExited) {
		t.Fatalf("Reply after the exit = %v, want ErrExited", err)
	}
}

func TestHeapLimitIsNamed(t *testing.T) {
	f := newFakeRuntime()
	r := testRunner(f)
	r.Policy.Resources.Memory = "256m"
	run, p := start(t, r, f, "…")
	_, _ = p.stderr.Write([]byte("#\n# Fatal JavaScript out of memory: Reached heap limit\n#\n==== C stack trace\n"))
	p.exit <- 133
	_, err := nextEvent(t, run)
	if !errors.Is(err, ErrOutOfMemory) || !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "192 MiB") {
		t.Fatalf("Next = %v", err)
	}
}

func TestTimeoutKillsTheRun(t *testing.T) {
	f := newFakeRuntime()
	r := testRunner(f)
	r.Timeout = 50 * time.Millisecond
	run, p := start(t, r, f, "…")
	_, err := nextEvent(t, run)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "50ms") {
		t.Fatalf("Next = %v", err)
	}
	run.Kill()
	if !p.wasKilled() || !p.removed() {
		t.Fatal("the container outlived the timeout")
	}
}

func TestKillEndsAWaitingNext(t *testing.T) {
	f := newFakeRuntime()
	run, p := start(t, testRunner(f), f, "…")
	got := make(chan error, 1)
	go func() {
		_, err := run.Next(context.Background())
		got <- err
	}()
	run.Kill()
	select {
	case err := <-got:
		if !errors.Is(err, ErrKilled) {
			t.Fatalf("Next = %v, want ErrKilled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return after Kill")
	}
	if !p.removed() {
		t.Fatal("Kill returned before the container was removed")
	}
	run.Kill() // again: a no-op
}

func TestOutputLimitStopsTheRun(t *testing.T) {
	f := newFakeRuntime()
	r := testRunner(f)
	r.Policy.OutputLimit = 1000
	run, p := start(t, r, f, "…")
	_, _ = p.stderr.Write([]byte(strings.Repeat("y", 600) + "\n"))
	p.send(strings.Repeat("x", 600))
	_, err := nextEvent(t, run)
	if !errors.Is(err, ErrOutputLimit) || !strings.Contains(err.Error(), "1000 bytes") {
		t.Fatalf("Next = %v", err)
	}
	run.Kill()
	if !p.wasKilled() {
		t.Fatal("the container was not stopped")
	}
}

// Giving up on Next (a paused approval) leaves the run alone.
func TestNextContextDoesNotEndTheRun(t *testing.T) {
	f := newFakeRuntime()
	run, p := start(t, testRunner(f), f, "…")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := run.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next = %v", err)
	}
	p.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t:x"}}`)
	if c := mustCall(t, run); c.ID != 1 {
		t.Fatalf("call = %+v", c)
	}
	if p.wasKilled() {
		t.Fatal("the container was stopped")
	}
}

func TestModuleProgramMessage(t *testing.T) {
	f := newFakeRuntime()
	run, err := testRunner(f).StartProgram(context.Background(), Program{Module: "export function f() {}", Export: "f", Args: map[string]any{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Kill()
	m := f.proc(t).recv(t)
	want := map[string]any{"module": "export function f() {}", "export": "f", "args": map[string]any{"n": 1.0}}
	if !reflect.DeepEqual(m["params"], want) {
		t.Fatalf("params = %v, want %v", m["params"], want)
	}
}
