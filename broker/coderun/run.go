package coderun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/internal/panics"
	"github.com/pml-dev/pml/policies"
)

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

// depthKey carries how deep a run is (runs started by its inner calls are
// one deeper) in the context of its inner calls.
type depthKey struct{}

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
	// declared is what the run's code declares it calls, as a person
	// approved it before the run (nil: nothing declared): it goes with
	// each inner call (call.Request.Run).
	declared *call.Declared
	// denied is the first refusal by permissions.deny of an inner call:
	// a run that then fails was denied, not a tool's own failure (pml
	// call exits 4 for it, as for a denied call of its own).
	denied atomic.Pointer[error]
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
	approval workflow.Approval
}

// PausedCall rides on the workflow of a paused inner call (its payload,
// an approve.Resumer): the person's answer resumes the run (Resume).
type PausedCall struct {
	runs     *Runs
	ex       *execution
	callID   int64
	inner    any // the workflow's own data (an integrity change), restored for its answer
	answered atomic.Bool
}

// Runs starts code in Deno containers (the cloud's execute_locally,
// deno capabilities) and drives each run: every mcp.* call of the code is
// answered through calls, the whole request path (Broker.Call). It holds
// only that, what it takes of the sandbox and its timeouts; a paused run
// is resumed by the approver that took the person's answer
// (PausedCall.Resume).
type Runs struct {
	sb Sandbox
	// hil is how long an approval may wait; idle how long a pre-started
	// container waits for its code.
	hil, idle time.Duration
	// base ends every run (Close).
	base  context.Context
	calls Caller
}

// Caller is the request path an inner call of code goes through (the
// broker: Broker.Call), from its top (the audit layer).
type Caller interface {
	Call(ctx context.Context, req call.Request) call.Result
}

// Sandbox is what a run takes of pml's sandbox (broker's sandbox, wired
// in New): the containers' runtime and pre-started pool, the user, the
// log, and the Containers it starts.
type Sandbox struct {
	// Runtime is the cap-limited runtime; Pool its pre-started
	// containers, where a run's container comes from.
	Runtime container.Runtime
	Pool    *container.Prestarted
	// User is the sandbox's user (code never runs as root: codeUser).
	User       string
	Containers Containers
	Log        zerolog.Logger
}

// Containers is what a run's container is started with, read at each
// start (a reload replaces the policy).
type Containers interface {
	// Policy is the container policy in force.
	Policy() policies.Policy
	// Labels are the labels of a container started for a purpose.
	Labels(purpose string) map[string]string
	// Supervisor is the host path of pml's in-container program, or "".
	Supervisor(ctx context.Context) string
}

// Options is what New builds Runs from: the sandbox, the timeouts, the
// context that ends every run and the request path (Calls).
type Options struct {
	Sandbox Sandbox
	// HIL is how long an approval may wait (hil.timeout); Idle how long a
	// pre-started container waits (sandbox.idle_timeout).
	HIL, Idle time.Duration
	Base      context.Context
	Calls     Caller
}

// New returns the code runs of one broker.
func New(o Options) *Runs {
	return &Runs{sb: o.Sandbox, hil: o.HIL, idle: o.Idle, base: o.Base, calls: o.Calls}
}

// Start starts a program and drives it for c, the call of outer. c's
// request (its workflows, elicitation) is the one the run's inner calls
// ask through: the same client.
func (r *Runs) Start(ctx context.Context, c *call.Call, outer string, prog execute.Program) call.Result {
	depth, _ := ctx.Value(depthKey{}).(int)
	if depth >= maxRunDepth {
		return call.ResultFor(fmt.Errorf("%w: %s: runs nest %d deep (code calling code calling code); refused", call.ErrInvalidInput, outer, depth))
	}
	run, err := r.runner(ctx).StartProgram(ctx, prog)
	if err != nil {
		if errors.Is(err, container.ErrUnavailable) || errors.Is(err, container.ErrImageMissing) {
			return call.ResultFor(fmt.Errorf("%w: %w", call.ErrUnavailable, err))
		}
		return call.ResultFor(fmt.Errorf("%s: %w", outer, err))
	}
	r.sb.Log.Info().Str("tool", outer).Msg("running code in a Deno container")
	ex := &execution{run: run, outer: outer, events: make(chan runEvent), pauses: make(chan paused, 64),
		inflight: make(chan struct{}, maxRunInFlight)}
	base := context.WithValue(r.base, depthKey{}, depth+1)
	// What the capability declared (and a person approved before it
	// started) goes with its inner calls: those do not ask again, the
	// others are flagged (call.Declared).
	ex.declared = c.UpFrontFor(outer)
	ex.ctx, ex.cancel = context.WithCancel(base)
	// pml closing (or the run ending any way) stops the code and frees
	// its container, even while it waits for an approval.
	context.AfterFunc(ex.ctx, func() { ex.run.Kill() })
	// A panic here ends the events: the run ends "without a result".
	go panics.Guarded(r.sb.Log, "tools/call", "reading the events of the code "+outer+" runs", func() {
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
	return r.drive(ctx, ex, c.Req)
}

// drive answers the run's calls until it is done or an inner call needs a
// person.
func (r *Runs) drive(ctx context.Context, ex *execution, req call.Request) call.Result {
	for {
		select {
		case <-ctx.Done():
			// The client cancelled the outer call: stop the code.
			ex.finish()
			return call.ResultFor(fmt.Errorf("%s was cancelled: the code's container was stopped", ex.outer))
		case p := <-ex.pauses:
			return approve.ApprovalResult(p.approval)
		case e, ok := <-ex.events:
			if !ok {
				return call.ResultFor(fmt.Errorf("%s: the run ended without a result", ex.outer))
			}
			if e.err != nil {
				ex.finish()
				return call.ResultFor(fmt.Errorf("%s: running the code failed: %v", ex.outer, e.err))
			}
			switch ev := e.ev.(type) {
			case execute.Done:
				ex.finish()
				res := doneResult(ex.outer, ev)
				if d := ex.denied.Load(); d != nil && res.IsError {
					res.Cause = fmt.Errorf("%s: an inner call was refused (%w), and the code failed", ex.outer, *d)
				}
				return res
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
func (r *Runs) innerCall(ex *execution, c execute.Call, req call.Request) {
	if c.Tool == ex.outer || c.Tool == call.ContinueTool {
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
		ask = func(ctx context.Context, a workflow.Approval) (string, bool) {
			ex.run.Pause()
			defer ex.run.Resume()
			return req.Ask(ctx, a)
		}
	}
	args, _ := json.Marshal(c.Args)
	res := r.guardedCall(ex.ctx, call.Request{Tool: c.Tool, Args: args, Workflows: req.Workflows, Ask: ask, Dialog: req.Dialog, Run: ex.declared})
	<-ex.inflight
	r.settle(ex, c.ID, req.Workflows, res)
}

// guardedCall is r.calls.Call in a goroutine of pml's own (an inner call of
// code): a panic in it is the call's error, which the code gets, not the
// end of pml.
func (r *Runs) guardedCall(ctx context.Context, req call.Request) (res call.Result) {
	defer func() {
		if v := recover(); v != nil {
			res = call.ResultFor(errors.New(panics.Recovered(r.sb.Log, v, "tools/call", req.Tool).Message))
		}
	}()
	return r.calls.Call(ctx, req)
}

// settle delivers an inner call's result to the code, or pauses the run
// when the result asks a person.
func (r *Runs) settle(ex *execution, callID int64, wfs *workflow.Workflows, res call.Result) {
	if err := res.Err(); err != nil && errors.Is(err, call.ErrDenied) {
		ex.denied.CompareAndSwap(nil, &err)
	}
	if a, ok := res.Approval(); ok && wfs != nil {
		pc := &PausedCall{runs: r, ex: ex, callID: callID}
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
					r.sb.Log.Info().Str("tool", ex.outer).Msg("an approval inside the run expired; stopping the code")
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

// Resume applies the answer to a paused inner call, through ap as the
// inner call's own workflow (its payload restored), and drives the run
// on: the same run, not a new one. c is the call that answered; the
// run's next pause asks its client. A no in the client's dialog is the
// inner call's refusal, which the code gets; the run's result is the
// answer's.
func (pc *PausedCall) Resume(ctx context.Context, ap *approve.Approver, c *call.Call, wfs *workflow.Workflows, wf *workflow.Workflow, a approve.Answer) call.Result {
	r := pc.runs
	pc.answered.Store(true)
	pc.ex.run.Resume()
	wf.Data = pc.inner
	res := ap.Answer(ctx, c, wfs, wf, a.Approved, a.Always)
	// The answer is the paused call's entry, in the answering call: a
	// call the capability did not declare stays flagged there too.
	if e, ok := c.Noted(); ok {
		if d := pc.ex.declared; d != nil && !d.Declares(e.Tool) {
			e.NotDeclaredBy = d.Capability
			c.Note(e)
		}
	}
	if wfs.Pending(wf) {
		// The answer could not be applied (saving "always" failed) and the
		// workflow is answerable again: the run stays paused on it.
		wf.Data = pc
		pc.answered.Store(false)
		pc.ex.run.Pause()
		return res
	}
	r.settle(pc.ex, pc.callID, wfs, res)
	return r.drive(ctx, pc.ex, c.Req)
}

// doneResult is the final result of a run.
func doneResult(outer string, d execute.Done) call.Result {
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
		return call.Result{Text: fmt.Sprintf("%s: the code failed: %s", outer, d.Error), Structured: structured, IsError: true}
	}
	return call.Result{Text: string(result), Structured: structured}
}
