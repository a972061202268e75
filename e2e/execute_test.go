//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/policies"
)

// These tests drive internal/execute directly against the real daemon and
// the real pml/deno image (built by `make images-deno`): the runner, Deno's
// permission sandbox and the container together.

// newExecRunner returns a Runner whose containers carry a label of this
// test's own, checked for leftovers at cleanup.
func newExecRunner(t *testing.T) *execute.Runner {
	t.Helper()
	if _, err := pool.Client.InspectImage(execute.DefaultImage); err != nil {
		t.Fatalf("the image %s is missing (build it with `make images-deno`): %v", execute.DefaultImage, err)
	}
	rt, err := docker.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	dir := t.TempDir()
	t.Cleanup(func() { assertNoContainers(t, dir) })
	uid := os.Geteuid()
	if uid == 0 {
		uid = testUID
	}
	return &execute.Runner{
		Runtime: rt,
		Policy:  policies.Default(),
		User:    fmt.Sprintf("%d:%d", uid, uid),
		Labels:  map[string]string{container.LabelWorkspace: dir},
		Timeout: 60 * time.Second,
	}
}

func startCode(t *testing.T, r *execute.Runner, code string) *execute.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := r.Start(ctx, code)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(run.Kill)
	return run
}

func next(t *testing.T, run *execute.Run) execute.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ev, err := run.Next(ctx)
	if err != nil {
		t.Fatalf("next: %v\nstderr:\n%s", err, run.Stderr(20))
	}
	return ev
}

func nextCall(t *testing.T, run *execute.Run) execute.Call {
	t.Helper()
	ev := next(t, run)
	c, ok := ev.(execute.Call)
	if !ok {
		t.Fatalf("expected a call, got %#v", ev)
	}
	return c
}

func nextDone(t *testing.T, run *execute.Run) execute.Done {
	t.Helper()
	ev := next(t, run)
	d, ok := ev.(execute.Done)
	if !ok {
		t.Fatalf("expected the end of the code, got %#v", ev)
	}
	return d
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func TestExecuteCallThenReturn(t *testing.T) {
	r := newExecRunner(t)
	// Console output goes to stderr: it must not get in the protocol's way.
	run := startCode(t, r, `console.log("noise on the console"); console.count(); console.table([{a: 1}]);
const a = await mcp.fs.read({path: "x"}); return a + "!"`)
	c := nextCall(t, run)
	if c.Tool != "fs:read" || !reflect.DeepEqual(c.Args, map[string]any{"path": "x"}) {
		t.Fatalf("call = %+v, want fs:read {path: x}", c)
	}
	if err := run.Reply(c.ID, textResult("hello")); err != nil {
		t.Fatal(err)
	}
	d := nextDone(t, run)
	if d.Status != "success" || string(d.Result) != `"hello!"` || len(d.ToolFailures) != 0 {
		t.Fatalf("done = %+v (result %s)", d, d.Result)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := run.Next(ctx); !errors.Is(err, execute.ErrFinished) {
		t.Fatalf("Next after Done = %v, want ErrFinished", err)
	}
	if err := run.Reply(c.ID, textResult("again")); err == nil {
		t.Fatal("a second answer to an answered call was accepted")
	}
	if !strings.Contains(run.Stderr(10), "noise on the console") {
		t.Fatalf("stderr = %q, want the console output", run.Stderr(10))
	}
}

// Large answers and non-ASCII text cross the bridge intact.
func TestExecuteLargeUnicodeAnswer(t *testing.T) {
	r := newExecRunner(t)
	run := startCode(t, r, `const s: string = await mcp.fs.read({path: "é"}); return {length: s.length, head: s.slice(0, 3), last: s.at(-1)};`)
	c := nextCall(t, run)
	if c.Args["path"] != "é" {
		t.Fatalf("args = %v", c.Args)
	}
	big := "ü✓x" + strings.Repeat("0123456789", 300_000) + "€"
	if err := run.Reply(c.ID, textResult(big)); err != nil {
		t.Fatal(err)
	}
	d := nextDone(t, run)
	want := fmt.Sprintf(`{"length":%d,"head":"ü✓x","last":"€"}`, len([]rune(big)))
	if d.Status != "success" || string(d.Result) != want {
		t.Fatalf("done = %+v (result %s), want %s", d, d.Result, want)
	}
}

// All ten calls are out before any is answered, the answers go back in
// reverse order, and each promise gets its own answer.
func TestExecutePromiseAllAnsweredOutOfOrder(t *testing.T) {
	r := newExecRunner(t)
	run := startCode(t, r, `
const rs = await Promise.all(Array.from({length: 10}, (_, i) => mcp.calc.square({n: i})));
return rs.map((r) => r.square);`)
	var calls []execute.Call
	for len(calls) < 10 {
		c := nextCall(t, run)
		if c.Tool != "calc:square" {
			t.Fatalf("call %+v", c)
		}
		calls = append(calls, c)
	}
	ids := map[int64]bool{}
	for _, c := range calls {
		ids[c.ID] = true
	}
	if len(ids) != 10 {
		t.Fatalf("call ids are not unique: %v", ids)
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].ID > calls[j].ID })
	for _, c := range calls {
		n := int(c.Args["n"].(float64))
		res := &mcp.CallToolResult{StructuredContent: map[string]any{"square": n * n}, Content: []mcp.Content{&mcp.TextContent{Text: "ignored"}}}
		if err := run.Reply(c.ID, res); err != nil {
			t.Fatal(err)
		}
	}
	d := nextDone(t, run)
	if d.Status != "success" || string(d.Result) != `[0,1,4,9,16,25,36,49,64,81]` {
		t.Fatalf("done = %+v (result %s)", d, d.Result)
	}
}

func TestExecuteToolErrorsReject(t *testing.T) {
	r := newExecRunner(t)
	t.Run("caught: the code goes on, the failure is listed", func(t *testing.T) {
		run := startCode(t, r, `
let caught = "";
try { await mcp.fs.read({path: "missing"}); } catch (e) { caught = e.name + "/" + e.message; }
return caught;`)
		c := nextCall(t, run)
		res := textResult("missing: no such file")
		res.IsError = true
		if err := run.Reply(c.ID, res); err != nil {
			t.Fatal(err)
		}
		d := nextDone(t, run)
		if d.Status != "success" || string(d.Result) != `"ToolError/missing: no such file"` {
			t.Fatalf("done = %+v (result %s)", d, d.Result)
		}
		if want := []execute.ToolFailure{{Tool: "fs:read", Error: "missing: no such file"}}; !reflect.DeepEqual(d.ToolFailures, want) {
			t.Fatalf("tool failures = %+v, want %+v", d.ToolFailures, want)
		}
	})
	t.Run("uncaught: the code ends with an error", func(t *testing.T) {
		run := startCode(t, r, `await mcp.fs.write({path: "y"}); return "not reached";`)
		c := nextCall(t, run)
		if err := run.Fail(c.ID, "fs:write was denied by .pml.json"); err != nil {
			t.Fatal(err)
		}
		d := nextDone(t, run)
		if d.Status != "error" || string(d.Result) != "null" || !strings.Contains(d.Error, "fs:write was denied by .pml.json") {
			t.Fatalf("done = %+v (result %s)", d, d.Result)
		}
		if len(d.ToolFailures) != 1 || d.ToolFailures[0].Tool != "fs:write" {
			t.Fatalf("tool failures = %+v", d.ToolFailures)
		}
	})
}

// A run waits, container alive, while a call is unanswered (as it does for
// a human approval), and resumes where it was: the value it computed before
// the call is the one it returns after.
func TestExecutePauseKeepsTheRun(t *testing.T) {
	r := newExecRunner(t)
	run := startCode(t, r, `
const token = crypto.randomUUID();
const answer = await mcp.ask.approve({token});
return {token, answer};`)
	c := nextCall(t, run)
	token, _ := c.Args["token"].(string)
	if token == "" {
		t.Fatalf("call %+v carries no token", c)
	}
	time.Sleep(3 * time.Second)
	info, err := pool.Client.InspectContainer(run.ContainerID())
	if err != nil || !info.State.Running {
		t.Fatalf("the container is not running while the call waits: %v %+v", err, info)
	}
	if err := run.Reply(c.ID, textResult("approved")); err != nil {
		t.Fatal(err)
	}
	d := nextDone(t, run)
	var got struct{ Token, Answer string }
	if err := json.Unmarshal(d.Result, &got); err != nil || d.Status != "success" {
		t.Fatalf("done = %+v (result %s): %v", d, d.Result, err)
	}
	if got.Token != token || got.Answer != "approved" {
		t.Fatalf("after the pause the run returned %+v, want token %s: not the same run", got, token)
	}
}

// Deno's sandbox: the code cannot read a file, reach a listener on the
// host's loopback, start a process or read the environment; each attempt
// fails with Deno's permission error, and the listener sees nothing.
func TestExecuteDenoPermissionsDenied(t *testing.T) {
	ln, accepted := hostListener(t)
	port := ln.Addr().(*net.TCPAddr).Port

	r := newExecRunner(t)
	run := startCode(t, r, fmt.Sprintf(`
const out: Record<string, string> = {};
async function probe(name: string, f: () => unknown) {
  try { await f(); out[name] = "ALLOWED"; } catch (e) { out[name] = e.name + ": " + e.message; }
}
await probe("read", () => Deno.readTextFile("/etc/hostname"));
await probe("fetch", () => fetch("http://127.0.0.1:%[1]d/"));
await probe("connect", () => Deno.connect({hostname: "127.0.0.1", port: %[1]d}));
await probe("command", () => new Deno.Command("/bin/sh", {args: ["-c", "true"]}).output());
await probe("env", () => Deno.env.get("HOME"));
await probe("write", () => Deno.writeTextFile("/tmp/x", "y"));
await probe("import", () => import("file:///etc/hostname", {with: {type: "text"}}));
return out;`, port))
	d := nextDone(t, run)
	if d.Status != "success" {
		t.Fatalf("done = %+v", d)
	}
	var out map[string]string
	if err := json.Unmarshal(d.Result, &out); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"read":    `NotCapable: Requires read access to "/etc/hostname"`,
		"fetch":   fmt.Sprintf(`NotCapable: Requires net access to "127.0.0.1:%d"`, port),
		"connect": fmt.Sprintf(`NotCapable: Requires net access to "127.0.0.1:%d"`, port),
		"command": `NotCapable: Requires run access to "/bin/sh"`,
		"env":     `NotCapable: Requires env access to "HOME"`,
		"write":   `NotCapable: Requires write access to "/tmp/x"`,
		"import":  `Requires read access to "/etc/hostname"`,
	}
	for k, w := range want {
		if !strings.Contains(out[k], w) {
			t.Errorf("%s: got %q, want Deno's permission error %q", k, out[k], w)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the host listener accepted %d connections from the code", n)
	}
}

func TestExecuteInfiniteLoopIsKilledAtTheTimeout(t *testing.T) {
	r := newExecRunner(t)
	r.Timeout = 2 * time.Second
	run := startCode(t, r, `while (true) {}`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ev, err := run.Next(ctx)
	if !errors.Is(err, execute.ErrTimeout) || !strings.Contains(err.Error(), "2s") {
		t.Fatalf("Next = %#v, %v; want the timeout error naming the limit", ev, err)
	}
	run.Kill()
	if left := containersOf(t, r.Labels[container.LabelWorkspace]); len(left) != 0 {
		t.Fatalf("the killed run left %d containers", len(left))
	}
}

// The container dying before the code finishes is an error naming the exit
// code and quoting stderr.
func TestExecuteExitWithoutDone(t *testing.T) {
	r := newExecRunner(t)
	run := startCode(t, r, `console.error("last words before exit"); Deno.exit(3);`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := run.Next(ctx)
	if !errors.Is(err, execute.ErrExited) || !strings.Contains(err.Error(), "exit code 3") || !strings.Contains(err.Error(), "last words before exit") {
		t.Fatalf("Next = %v; want the exit code and the stderr line", err)
	}
}

// Kill while a call waits: the run ends with ErrKilled, late answers are
// refused, and the container is gone when Kill returns.
func TestExecuteKillWhileWaiting(t *testing.T) {
	r := newExecRunner(t)
	run := startCode(t, r, `await mcp.slow.op({}); return 1`)
	c := nextCall(t, run)
	run.Kill()
	if left := containersOf(t, r.Labels[container.LabelWorkspace]); len(left) != 0 {
		t.Fatalf("Kill returned with %d containers left", len(left))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := run.Next(ctx); !errors.Is(err, execute.ErrKilled) {
		t.Fatalf("Next after Kill = %v, want ErrKilled", err)
	}
	if err := run.Reply(c.ID, textResult("late")); !errors.Is(err, execute.ErrKilled) {
		t.Fatalf("Reply after Kill = %v, want ErrKilled", err)
	}
}

// The policy's memory limit reaches V8: a runaway allocation ends with V8's
// heap-limit message rather than an anonymous kill.
func TestExecuteMemoryLimit(t *testing.T) {
	r := newExecRunner(t)
	r.Policy.Resources.Memory = "128m"
	run := startCode(t, r, `const keep = []; while (true) keep.push(new Array(1e6).fill(Math.random()));`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := run.Next(ctx)
	if !errors.Is(err, execute.ErrOutOfMemory) || !strings.Contains(err.Error(), "heap limit of 96 MiB") {
		t.Fatalf("Next = %v; want the out-of-memory error naming V8's heap limit (3/4 of 128m)", err)
	}
}

func TestExecuteOutputLimit(t *testing.T) {
	r := newExecRunner(t)
	r.Policy.OutputLimit = 64 << 10
	run := startCode(t, r, `while (true) console.log("x".repeat(1000));`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := run.Next(ctx); !errors.Is(err, execute.ErrOutputLimit) {
		t.Fatalf("Next = %v, want ErrOutputLimit", err)
	}
}

// A module's exported function runs with its argument (how `pml run` runs
// a deno capability), and its mcp calls work the same way.
func TestExecuteModuleExport(t *testing.T) {
	r := newExecRunner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mod := `
interface Args { name: string }
export async function greet(args: Args): Promise<string> {
  const suffix = await mcp.text.suffix({});
  return "hello " + args.name + suffix;
}
export function other() {}
export const notAFunction = 1;`
	run, err := r.StartProgram(ctx, execute.Program{Module: mod, Export: "greet", Args: map[string]any{"name": "ada"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(run.Kill)
	c := nextCall(t, run)
	if err := run.Reply(c.ID, textResult("!")); err != nil {
		t.Fatal(err)
	}
	if d := nextDone(t, run); d.Status != "success" || string(d.Result) != `"hello ada!"` {
		t.Fatalf("done = %+v (result %s)", d, d.Result)
	}

	list, err := r.StartProgram(ctx, execute.Program{Module: mod})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(list.Kill)
	if d := nextDone(t, list); string(d.Result) != `["greet","other"]` {
		t.Fatalf("exports = %+v (result %s)", d, d.Result)
	}
}

// BenchmarkExecuteTrivial is the cold start of a run: container start,
// Deno start, the runner, `return 1`, Done (container removal excluded).
// go test -run '^$' -bench ExecuteTrivial -benchtime 7x ./e2e
func BenchmarkExecuteTrivial(b *testing.B) {
	rt, err := docker.New()
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	uid := os.Geteuid()
	if uid == 0 {
		uid = testUID
	}
	r := &execute.Runner{Runtime: rt, Policy: policies.Default(), User: fmt.Sprintf("%d:%d", uid, uid)}
	var ds []time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		run, err := r.Start(context.Background(), "return 1")
		if err != nil {
			b.Fatal(err)
		}
		ev, err := run.Next(context.Background())
		ds = append(ds, time.Since(t0))
		run.Kill()
		if d, ok := ev.(execute.Done); err != nil || !ok || string(d.Result) != "1" {
			b.Fatalf("%#v %v", ev, err)
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	b.ReportMetric(float64(ds[len(ds)/2].Milliseconds()), "median-ms")
}
