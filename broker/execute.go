package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/internal/panics"
)

// execute_locally (seed 003, option A): the cloud answers pml:execute with
// code to run here. The code runs in a Deno container that can touch
// nothing (internal/execute); each of its mcp.* calls comes back here and
// goes through the whole request path — resolve, permission, approval,
// container or cloud, audit — one at a time. An inner call that needs a
// person pauses the run: the outer call returns approval_required, the
// container waits, and the answer resumes the same run.

// ExecuteTool is the cloud's planner: the one tool whose answer may be
// code to run here.
const ExecuteTool = "pml:execute"

// maxRunDepth bounds runs started from inside runs (a capability whose
// code calls another capability): each is a container.
const maxRunDepth = 3

// A run's inner calls are bounded: at most maxRunCalls over its life (the
// ones beyond fail at once inside the code) and maxRunInFlight at a time
// (the others wait their turn, within the run's timeout). Code doing
// Promise.all over thousands of mcp.* calls thus neither floods the
// machine with containers nor hangs pml.
const (
	maxRunCalls    = 1000
	maxRunInFlight = 8
)

type depthKey struct{}

// requestKey carries the calling request (its workflows and elicitation)
// to the tools a call runs, so a run's inner calls ask the same client.
type requestKey struct{}

func requestOf(ctx context.Context) Request {
	r, _ := ctx.Value(requestKey{}).(Request)
	return r
}

// execution is one run of cloud code, alive across the outer calls that
// drive it (the first, and each continuation after a pause).
type execution struct {
	run    *execute.Run
	outer  string
	events chan runEvent
	pauses chan paused
	// ctx lives as long as the run: inner calls keep running while the
	// outer call is back with the client for an approval.
	ctx    context.Context
	cancel context.CancelFunc
	// calls counts the inner calls made; inflight holds a token per call
	// running through the request path.
	calls    atomic.Int64
	inflight chan struct{}
	// refused holds the ids of calls past maxRunCalls not yet answered;
	// one goroutine at a time answers them (code may make any number).
	refuseMu sync.Mutex
	refused  []int64
	refusing bool
}

// refuse answers call id with an error inside the code, in the order
// refused, from at most one goroutine per run.
func (ex *execution) refuse(id int64) {
	ex.refuseMu.Lock()
	ex.refused = append(ex.refused, id)
	if ex.refusing {
		ex.refuseMu.Unlock()
		return
	}
	ex.refusing = true
	ex.refuseMu.Unlock()
	go func() {
		for {
			ex.refuseMu.Lock()
			if len(ex.refused) == 0 {
				ex.refusing = false
				ex.refuseMu.Unlock()
				return
			}
			id := ex.refused[0]
			ex.refused = ex.refused[1:]
			ex.refuseMu.Unlock()
			_ = ex.run.Fail(id, fmt.Sprintf("refused: code run by %s may make at most %d tool calls", ex.outer, maxRunCalls))
		}
	}()
}

type runEvent struct {
	ev  execute.Event
	err error
}

// paused is an inner call waiting for a person.
type paused struct {
	callID   int64
	approval Approval
}

// pausedCall rides on the workflow of a paused inner call.
type pausedCall struct {
	ex       *execution
	callID   int64
	inner    any // the workflow's own data (an integrity change), restored for its answer
	answered atomic.Bool
}

// codeRuns starts code in Deno containers (the cloud's execute_locally,
// deno capabilities) and drives each run: every mcp.* call of the code is
// answered through call, the whole request path (Broker.Call). It holds
// only that, the sandbox and its timeouts.
type codeRuns struct {
	sb *sandbox
	// hil is how long an approval may wait; idle how long a pre-started
	// container waits for its code.
	hil, idle time.Duration
	// base ends every run (Close).
	base context.Context
	call func(ctx context.Context, req Request) Result
}

// runner builds the Deno runner with the broker's policy. The run may
// wait for one approval on top of its compute time.
func (r *codeRuns) runner(ctx context.Context) *execute.Runner {
	return &execute.Runner{
		Runtime: &pooledRuntime{Runtime: r.sb.rt, pool: r.sb.pool},
		Image:   execute.DefaultImage,
		Policy:  r.sb.policy(),
		User:    codeUser(r.sb.user),
		Labels:  r.sb.labels("execute"),
		Timeout: time.Duration(r.sb.policy().Timeout) + r.hil,
		// Compute time is sandbox.timeout; waits for a person pause it.
		Budget: time.Duration(r.sb.policy().Timeout),
		// The container ends by itself with pml's end of its stdin, or at
		// the run's ceiling plus the longest a pre-started one waits.
		Supervisor: r.sb.supervisor(ctx),
		Lifetime:   time.Duration(r.sb.policy().Timeout) + r.hil + r.idle + time.Minute,
	}
}

// codeUser is the user code runs as: the sandbox's, except that code never
// runs as root (a root-owned workspace gives tools uid 0 so that they can
// write it; code run by Deno writes nothing of the workspace, so it runs
// as nobody instead).
func codeUser(u string) string {
	if container.IsRoot(u) {
		return container.Nobody.String()
	}
	return u
}

// start starts a program and drives it.
func (r *codeRuns) start(ctx context.Context, outer string, prog execute.Program) Result {
	depth, _ := ctx.Value(depthKey{}).(int)
	if depth >= maxRunDepth {
		return errorResult(fmt.Errorf("%w: %s: runs nest %d deep (code calling code calling code); refused", ErrInvalidInput, outer, depth))
	}
	run, err := r.runner(ctx).StartProgram(ctx, prog)
	if err != nil {
		if errors.Is(err, container.ErrUnavailable) || errors.Is(err, container.ErrImageMissing) {
			return errorResult(fmt.Errorf("%w: %w", ErrUnavailable, err))
		}
		return errorResult(fmt.Errorf("%s: %w", outer, err))
	}
	r.sb.log.Info().Str("tool", outer).Msg("running the cloud's code locally in a Deno container")
	ex := &execution{run: run, outer: outer, events: make(chan runEvent), pauses: make(chan paused, 64),
		inflight: make(chan struct{}, maxRunInFlight)}
	ex.ctx, ex.cancel = context.WithCancel(context.WithValue(r.base, depthKey{}, depth+1))
	// pml closing (or the run ending any way) stops the code and frees
	// its container, even while it waits for an approval.
	context.AfterFunc(ex.ctx, func() { ex.run.Kill() })
	// A panic here ends the events: the run ends "without a result".
	go panics.Guarded(r.sb.log, "tools/call", "reading the events of the code "+outer+" runs", func() {
		defer close(ex.events)
		for {
			ev, err := run.Next(ex.ctx)
			select {
			case ex.events <- runEvent{ev, err}:
			case <-ex.ctx.Done():
				// Stopped (expired while paused, cancelled): nobody
				// drives the run any more.
				return
			}
			if _, done := ev.(execute.Done); done || err != nil {
				return
			}
		}
	})
	return r.drive(ctx, ex, requestOf(ctx))
}

// drive answers the run's calls until it is done or an inner call needs a
// person.
func (r *codeRuns) drive(ctx context.Context, ex *execution, req Request) Result {
	for {
		select {
		case <-ctx.Done():
			// The client cancelled the outer call: stop the code.
			ex.finish()
			return errorResult(fmt.Errorf("%s was cancelled: the code's container was stopped", ex.outer))
		case p := <-ex.pauses:
			return approvalResult(p.approval)
		case e, ok := <-ex.events:
			if !ok {
				return errorResult(fmt.Errorf("%s: the run ended without a result", ex.outer))
			}
			if e.err != nil {
				ex.finish()
				return errorResult(fmt.Errorf("%s: running the code failed: %v", ex.outer, e.err))
			}
			switch ev := e.ev.(type) {
			case execute.Done:
				ex.finish()
				return doneResult(ex.outer, ev)
			case execute.Call:
				if ex.calls.Add(1) > maxRunCalls {
					ex.refuse(ev.ID)
					continue
				}
				go r.innerCall(ex, ev, req)
			}
		}
	}
}

func (ex *execution) finish() {
	ex.cancel()
	ex.run.Kill()
}

// innerCall answers one mcp.* call of the code through the request path.
func (r *codeRuns) innerCall(ex *execution, c execute.Call, req Request) {
	if c.Tool == ex.outer || c.Tool == ContinueTool {
		_ = ex.run.Fail(c.ID, fmt.Sprintf("%s cannot be called from code that %s runs", c.Tool, ex.outer))
		return
	}
	// The code may not answer the session's approvals for itself.
	if _, ok := c.Args["continue_workflow"]; ok {
		_ = ex.run.Fail(c.ID, "continue_workflow cannot be given from code: approvals are answered by the person, through the client")
		return
	}
	// At most maxRunInFlight calls of one run at a time; the rest wait
	// here until one finishes or the run ends.
	select {
	case ex.inflight <- struct{}{}:
	case <-ex.ctx.Done():
		return
	}
	ask := req.Ask
	if ask != nil {
		// A person answering does not spend the run's compute time.
		ask = func(ctx context.Context, a Approval) (string, bool) {
			ex.run.Pause()
			defer ex.run.Resume()
			return req.Ask(ctx, a)
		}
	}
	args, _ := json.Marshal(c.Args)
	res := r.guardedCall(ex.ctx, Request{Tool: c.Tool, Args: args, Workflows: req.Workflows, Ask: ask, Dialog: req.Dialog})
	<-ex.inflight
	r.settle(ex, c.ID, req.Workflows, res)
}

// guardedCall is r.call in a goroutine of pml's own (an inner call of
// code): a panic in it is the call's error, which the code gets, not the
// end of pml.
func (r *codeRuns) guardedCall(ctx context.Context, req Request) (res Result) {
	defer func() {
		if v := recover(); v != nil {
			res = errorResult(errors.New(panics.Recovered(r.sb.log, v, "tools/call", req.Tool).Message))
		}
	}()
	return r.call(ctx, req)
}

// settle delivers an inner call's result to the code, or pauses the run
// when the result asks a person.
func (r *codeRuns) settle(ex *execution, callID int64, wfs *Workflows, res Result) {
	if a, ok := res.Approval(); ok && wfs != nil {
		pc := &pausedCall{ex: ex, callID: callID}
		if wf := wfs.Attach(a.WorkflowID, ex.outer, func(inner any) any { pc.inner = inner; return pc }); wf != nil {
			a.Description = "While " + ex.outer + " runs code on this machine: " + a.Description
			if a.Context == nil {
				a.Context = map[string]any{}
			}
			a.Context["run"] = ex.outer
			// Waiting for the person does not spend the run's compute
			// time; resumeRun restarts the clock.
			ex.run.Pause()
			// The run dies with its unanswered approval.
			time.AfterFunc(time.Until(a.ExpiresAt), func() {
				if !pc.answered.Load() {
					r.sb.log.Info().Str("tool", ex.outer).Msg("an approval inside the run expired; stopping the code")
					ex.finish()
				}
			})
			select {
			case ex.pauses <- paused{callID: callID, approval: a}:
			case <-ex.ctx.Done():
			}
			return
		}
	}
	_ = ex.run.Reply(callID, call.ToMCP(res))
}

// resumeRun applies the answer to a paused inner call and drives the run
// on: the same run, not a new one.
func (b *Broker) resumeRun(ctx context.Context, c *Call, wfs *Workflows, wf *Workflow, pc *pausedCall, approved, always bool) Result {
	pc.answered.Store(true)
	pc.ex.run.Resume()
	wf.Data = pc.inner
	res := b.answer(ctx, c, wfs, wf, approved, always)
	if wfs.Pending(wf) {
		// The answer could not be applied (saving "always" failed) and the
		// workflow is answerable again: the run stays paused on it.
		wf.Data = pc
		pc.answered.Store(false)
		pc.ex.run.Pause()
		return res
	}
	b.runs.settle(pc.ex, pc.callID, wfs, res)
	return b.runs.drive(ctx, pc.ex, requestOf(ctx))
}

// doneResult is the final result of a run.
func doneResult(outer string, d execute.Done) Result {
	failures := d.ToolFailures
	if failures == nil {
		failures = []execute.ToolFailure{}
	}
	result := d.Result
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	structured := map[string]any{"status": d.Status, "result": result, "tool_failures": failures}
	if d.Status != "success" {
		structured["error"] = d.Error
		return Result{Text: fmt.Sprintf("%s: the code failed: %s", outer, d.Error), Structured: structured, IsError: true}
	}
	return Result{Text: string(result), Structured: structured}
}

// pooledRuntime starts the runs' containers from the single-use pool, so
// a run usually finds a Deno container already started and waiting for
// its code.
type pooledRuntime struct {
	container.Runtime
	pool *container.Prestarted
}

func (p *pooledRuntime) Start(ctx context.Context, spec container.Spec, streams container.Streams) (container.Process, error) {
	lease, err := p.pool.Acquire(ctx, spec, streams)
	if err != nil {
		return nil, err
	}
	return &leased{Lease: lease}, nil
}

// leased ends its lease when the run removes its container.
type leased struct {
	*container.Lease
	mu sync.Mutex
}

// Remove keeps the runtime contract: Done is closed once it returns (the
// pool removes the container on Release), unless ctx ends first.
func (l *leased) Remove(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.Release()
	select {
	case <-l.Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
