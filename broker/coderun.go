package broker

import (
	"context"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/coderun"
	sbx "github.com/pml-dev/pml/broker/sandbox"
)

// ExecuteTool is the cloud's planner: the one tool whose answer may be
// code to run here (package coderun runs it).
const ExecuteTool = sbx.ExecuteTool

// Code runs live in package coderun; these names keep broker's files as
// they were.
type (
	codeRuns   = coderun.Runs
	pausedCall = coderun.PausedCall
)

// codeRunsOf builds the code runs of b with what they use of it: the
// sandbox's pieces, the timeouts, the context Close ends, the request path
// for inner calls, and the approval side's functions.
func codeRunsOf(b *Broker, sb *sandbox) *codeRuns {
	return coderun.New(coderun.Options{
		Sandbox: coderun.Sandbox{Runtime: sb.Runtime, Pool: sb.Pool, User: sb.User, Policy: sb.Policy,
			Labels: sb.Labels, Supervisor: sb.Supervisor, Log: sb.Log},
		HIL:  b.cfg.HIL.Timeout,
		Idle: b.cfg.Sandbox.IdleTimeout,
		Base: b.base,
		Call: b.Call,
		// From the approval side and the MCP surface.
		ApprovalResult: approve.ApprovalResult,
		// b.ask is built after the runs (it needs the servers' store):
		// looked up when a run's paused call is answered.
		Answer: func(ctx context.Context, c *Call, wfs *Workflows, wf *Workflow, approved, always bool) Result {
			return b.ask.Answer(ctx, c, wfs, wf, approved, always)
		},
	})
}
