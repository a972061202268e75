package broker

import (
	"context"

	"github.com/pml-dev/pml/broker/coderun"
	"github.com/pml-dev/pml/policies"
)

// ExecuteTool is the cloud's planner: the one tool whose answer may be
// code to run here (package coderun runs it).
const ExecuteTool = "pml:execute"

// Code runs live in package coderun; these names keep broker's files as
// they were.
type codeRuns = coderun.Runs

// codeRunsOf builds the code runs of b with what they use of it: the
// sandbox's pieces, the timeouts, the context Close ends and the request
// path for inner calls (b itself: Broker.Call). A paused run is resumed
// by the approver that takes the answer (approve.Resumer).
func codeRunsOf(b *Broker, sb *sandbox) *codeRuns {
	return coderun.New(coderun.Options{
		Sandbox: coderun.Sandbox{Runtime: sb.rt, Pool: sb.pool, User: sb.user, Containers: codeContainers{sb}, Log: sb.log},
		HIL:     b.cfg.HIL.Timeout,
		Idle:    b.cfg.Sandbox.IdleTimeout,
		Base:    b.base,
		Calls:   b,
	})
}

// codeContainers is what a run's container is started with, from the
// sandbox (coderun.Containers).
type codeContainers struct{ sb *sandbox }

func (c codeContainers) Policy() policies.Policy                 { return c.sb.policy() }
func (c codeContainers) Labels(purpose string) map[string]string { return c.sb.labels(purpose) }
func (c codeContainers) Supervisor(ctx context.Context) string   { return c.sb.supervisor(ctx) }
