package coderun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/policies"
)

// code plays the Deno runner in a fake container (the shared fake
// runtime, containertest): it gets pml's lines and writes the code's.
type code func(r *runner)

type runner struct {
	in  *bufio.Reader
	out io.Writer
}

// call makes the code call tool and returns pml's answer.
func (r *runner) call(id int, tool string, args map[string]any) map[string]any {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	_, _ = r.out.Write(append(b, '\n'))
	return r.recv()
}

func (r *runner) recv() map[string]any {
	line, err := r.in.ReadBytes('\n')
	if err != nil {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(line, &m)
	return m
}

// done ends the code with result.
func (r *runner) done(result any) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "pml/done", "params": map[string]any{"status": "success", "result": result}})
	_, _ = r.out.Write(append(b, '\n'))
}

// textOf is the text of an answer to a call, or its error's message.
func textOf(m map[string]any) string {
	if e, ok := m["error"].(map[string]any); ok {
		return "error: " + fmt.Sprint(e["message"])
	}
	res, _ := m["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	return fmt.Sprint(content[0].(map[string]any)["text"])
}

// requests is the request path of inner calls: it records them and
// answers with answer.
type requests struct {
	mu     sync.Mutex
	got    []call.Request
	answer func(req call.Request) call.Result
}

func (q *requests) Call(_ context.Context, req call.Request) call.Result {
	q.mu.Lock()
	q.got = append(q.got, req)
	q.mu.Unlock()
	return q.answer(req)
}

func (q *requests) tools() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, r := range q.got {
		out = append(out, r.Tool)
	}
	return out
}

type fixedContainers struct{}

func (fixedContainers) Policy() policies.Policy { return policies.Default() }
func (fixedContainers) Labels(string) map[string]string {
	return map[string]string{"pml.test": "coderun"}
}
func (fixedContainers) Supervisor(context.Context) string { return "" }

// newRuns is Runs over the fake runtime, whose one started container
// plays script; ttl is how long an approval waits.
func newRuns(t *testing.T, q *requests, script code) (*Runs, *containertest.Runtime, *workflow.Workflows, context.Context) {
	t.Helper()
	rt := &containertest.Runtime{Behave: func(p *containertest.Proc) int {
		r := &runner{in: bufio.NewReader(p.In), out: p.Out}
		if r.recv() == nil { // the program; a pre-started container never gets one
			return 0
		}
		script(r)
		<-p.Killed()
		return 137
	}}
	pool := container.NewPrestarted(container.PrestartedOptions{Runtime: rt, Logger: zerolog.Nop()})
	base, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		_ = pool.Close(ctx)
	})
	r := New(Options{Sandbox: Sandbox{Runtime: rt, Pool: pool, User: "1000:1000", Containers: fixedContainers{}, Log: zerolog.Nop()},
		HIL: time.Minute, Idle: time.Minute, Base: base, Calls: q})
	wfs := workflow.NewWorkflows(time.Minute)
	ctx := context.WithValue(context.Background(), testCallKey{}, &call.Call{Req: call.Request{Tool: "pml:execute", Workflows: wfs}})
	return r, rt, wfs, ctx
}

func TestAnInnerCallGoesThroughTheRequestPathAndItsResultToTheCode(t *testing.T) {
	q := &requests{answer: func(req call.Request) call.Result { return call.Result{Text: "body of " + string(req.Args)} }}
	r, _, wfs, ctx := newRuns(t, q, func(r *runner) {
		r.done(textOf(r.call(1, "filesystem:read_file", map[string]any{"path": "a.txt"})))
	})
	res := r.Start(ctx, callIn(ctx), "pml:execute", execute.Program{Code: "return 1"})
	if res.IsError || res.Text != `"body of {\"path\":\"a.txt\"}"` {
		t.Fatalf("%+v", res)
	}
	if q.got[0].Tool != "filesystem:read_file" || q.got[0].Workflows != wfs {
		t.Errorf("the inner call went as %+v: it asks through the outer call's session", q.got[0])
	}
}

func TestCodeCannotCallItsOwnToolNorAnswerApprovals(t *testing.T) {
	q := &requests{answer: func(call.Request) call.Result { return call.Result{Text: "ran"} }}
	r, _, _, ctx := newRuns(t, q, func(r *runner) {
		self := textOf(r.call(1, "pml:execute", map[string]any{}))
		cont := textOf(r.call(2, call.ContinueTool, map[string]any{}))
		relay := textOf(r.call(3, "filesystem:write_file", map[string]any{"continue_workflow": map[string]any{"workflow_id": "x", "approved": true}}))
		r.done([]string{self, cont, relay})
	})
	res := r.Start(ctx, callIn(ctx), "pml:execute", execute.Program{Code: "…"})
	for _, want := range []string{"pml:execute cannot be called from code", "pml:continue_workflow cannot be called from code", "continue_workflow cannot be given from code"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("%q is not in %s", want, res.Text)
		}
	}
	if len(q.tools()) != 0 {
		t.Errorf("reached the request path: %v", q.tools())
	}
}

func TestRunsNestAtMostMaxRunDepthDeep(t *testing.T) {
	q := &requests{}
	r, rt, _, ctx := newRuns(t, q, func(*runner) {})
	res := r.Start(context.WithValue(ctx, depthKey{}, maxRunDepth), callIn(context.WithValue(ctx, depthKey{}, maxRunDepth)), "mathx:double", execute.Program{Code: "…"})
	if !errors.Is(res.Err(), call.ErrInvalidInput) || !strings.Contains(res.Text, "runs nest 3 deep") {
		t.Fatalf("%+v", res)
	}
	if len(rt.Procs()) != 0 {
		t.Error("a container was started for a run refused by its depth")
	}
}

func TestAnEngineThatCannotStartTheRunIsUnavailable(t *testing.T) {
	q := &requests{}
	r, rt, _, ctx := newRuns(t, q, func(*runner) {})
	rt.StartErr = fmt.Errorf("no engine: %w", container.ErrUnavailable)
	if res := r.Start(ctx, callIn(ctx), "pml:execute", execute.Program{Code: "…"}); !errors.Is(res.Err(), call.ErrUnavailable) {
		t.Fatalf("%+v", res)
	}
}

// pausing answers an inner call of tool with an approval opened in the
// calling session, as the approve layer does.
func pausing(tool string) func(req call.Request) call.Result {
	return func(req call.Request) call.Result {
		if req.Tool != tool {
			return call.Result{Text: "ran " + req.Tool}
		}
		wf := req.Workflows.Create(workflow.ApprovalToolPermission, req.Tool, map[string]any{}, tool)
		return approve.ApprovalResult(workflow.Approval{ApprovalRequired: true, ApprovalType: wf.Type, WorkflowID: wf.ID, Tool: wf.Tool, Description: "Allow?", ExpiresAt: wf.Expires})
	}
}

// approver runs an approved inner call by the handler it was given.
func approver(ran *[]string) *approve.Approver {
	return &approve.Approver{Config: &config.Config{}, Execute: call.HandlerFunc(func(_ context.Context, c *call.Call) call.Result {
		*ran = append(*ran, c.Tool)
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Allowed})
		return call.Result{Text: "approved and ran"}
	})}
}

func TestAPausedRunResumesTheSameRunWithTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		approved bool
		inner    string // what the code got for its paused call
	}{{true, "approved and ran"}, {false, "Rejected: filesystem:write_file was not run."}} {
		q := &requests{answer: pausing("filesystem:write_file")}
		r, rt, wfs, ctx := newRuns(t, q, func(r *runner) {
			r.done(textOf(r.call(1, "filesystem:write_file", map[string]any{"path": "b"})))
		})
		res := r.Start(ctx, callIn(ctx), "pml:execute", execute.Program{Code: "…"})
		a, ok := res.Approval()
		if !ok || !strings.HasPrefix(a.Description, "While pml:execute runs code on this machine: ") || a.Context["run"] != "pml:execute" {
			t.Fatalf("the paused run did not ask: %+v", res)
		}
		var ran []string
		ans := call.NewCall(call.Request{Tool: "pml:execute", Workflows: wfs})
		ans.Cont = &workflow.Continuation{WorkflowID: a.WorkflowID, Approved: tc.approved}
		got := approver(&ran).AnswerCall(ctx, ans)
		if got.Text != fmt.Sprintf("%q", tc.inner) {
			t.Errorf("approved %v: the run ended with %+v", tc.approved, got)
		}
		if tc.approved != (len(ran) == 1) {
			t.Errorf("approved %v: ran %v", tc.approved, ran)
		}
		if n := len(rt.Procs()); n < 1 || rt.Procs()[0].Spec.Labels["pml.test"] != "coderun" {
			t.Errorf("the same run, in one container: %d started", n)
		}
	}
}

func TestAnApprovalThatExpiresStopsTheRun(t *testing.T) {
	q := &requests{answer: pausing("filesystem:write_file")}
	r, rt, _, _ := newRuns(t, q, func(r *runner) { r.call(1, "filesystem:write_file", nil) })
	wfs := workflow.NewWorkflows(200 * time.Millisecond)
	ctx := context.WithValue(context.Background(), testCallKey{}, &call.Call{Req: call.Request{Tool: "pml:execute", Workflows: wfs}})
	if _, ok := r.Start(ctx, callIn(ctx), "pml:execute", execute.Program{Code: "…"}).Approval(); !ok {
		t.Fatal("no approval")
	}
	select {
	case <-rt.Procs()[0].Killed():
	case <-time.After(10 * time.Second):
		t.Fatal("the run's container outlived its unanswered approval")
	}
}

func TestACancelledOuterCallStopsTheCode(t *testing.T) {
	q := &requests{answer: func(call.Request) call.Result { return call.Result{} }}
	started := make(chan struct{})
	r, rt, _, ctx := newRuns(t, q, func(*runner) { close(started) })
	ctx, cancel := context.WithCancel(ctx)
	go func() { <-started; cancel() }()
	res := r.Start(ctx, callIn(ctx), "pml:execute", execute.Program{Code: "…"})
	if !res.IsError || !strings.Contains(res.Text, "was cancelled: the code's container was stopped") {
		t.Fatalf("%+v", res)
	}
	select {
	case <-rt.Procs()[0].Killed():
	case <-time.After(10 * time.Second):
		t.Fatal("the code's container was not stopped")
	}
}

// testCallKey carries, in a test's context only, the outer call a run is
// started for (Runs.Start takes it as an argument).
type testCallKey struct{}

// callIn is the outer call ctx carries, or an empty one.
func callIn(ctx context.Context) *call.Call {
	if c, ok := ctx.Value(testCallKey{}).(*call.Call); ok {
		return c
	}
	return &call.Call{}
}
