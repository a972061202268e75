package broker

import (
	"github.com/pml-dev/pml/broker/coderun"
	sbx "github.com/pml-dev/pml/broker/sandbox"
)

// ExecuteTool is the cloud's planner: the one tool whose answer may be
// code to run here (package coderun runs it).
const ExecuteTool = sbx.ExecuteTool

// Code runs live in package coderun; these names keep broker's files as
// they were.
type codeRuns = coderun.Runs

// codeRunsOf builds the code runs of b with what they use of it: the
// sandbox's pieces, the timeouts, the context Close ends and the request
// path for inner calls (b itself: Broker.Call). A paused run is resumed
// by the approver that takes the answer (approve.Resumer).
func codeRunsOf(b *Broker, sb *sandbox) *codeRuns {
	return coderun.New(coderun.Options{
		Sandbox: coderun.Sandbox{Runtime: sb.Runtime, Pool: sb.Pool, User: sb.User, Containers: sb.Sandbox, Log: sb.Log},
		HIL:     b.cfg.HIL.Timeout,
		Idle:    b.cfg.Sandbox.IdleTimeout,
		Base:    b.base,
		Calls:   b,
	})
}
