package call

import (
	"context"

	"github.com/pml-dev/pml/internal/toolglob"
)

// Declared is what a capability declares its code calls (its registry
// entry's tools_used and client_tools) and, of those, the ones the
// permissions ask about: all put to the person in one approval before
// the run starts (seed 000 story 14.3 AC4-6). Once the run started, the
// calls it declared and the person approved do not ask again; a call it
// did not declare is decided on its own and flagged in the audit. A
// Declared is not changed once made: safe for concurrent use.
type Declared struct {
	// Capability is the tool whose run this is (mathx:double).
	Capability string
	// Tools are the declared tools; Asked those of them the permissions
	// ask about.
	Tools, Asked []string
	// Servers are the servers the capability requires (its mcp_deps),
	// none of them denied whole when the run was checked.
	Servers []string
	// WorkflowID is the approval that let the run start with Asked
	// approved ("" when nothing was asked).
	WorkflowID string
	// Held is the cloud's execute_locally answer whose run waits for
	// this approval (pml:execute, whose code is known only once the cloud
	// answered): approved, the run starts from it, and the cloud is not
	// asked again for other code. nil for a capability's run.
	Held map[string]any
}

// Declares reports whether d names tool (in any of the forms a
// permission pattern may name it: toolglob.Exact).
func (d *Declared) Declares(tool string) bool {
	return d != nil && named(d.Tools, tool)
}

// ApprovedUpFront reports whether tool was asked about and approved
// before the run started: its call does not ask again.
func (d *Declared) ApprovedUpFront(tool string) bool {
	return d != nil && d.WorkflowID != "" && named(d.Asked, tool)
}

// Approved is d once the person approved it in workflow id.
func (d *Declared) Approved(id string) *Declared {
	out := *d
	out.WorkflowID = id
	return &out
}

func named(list []string, tool string) bool {
	for _, t := range list {
		if toolglob.Exact(t, tool) {
			return true
		}
	}
	return false
}

// upFrontKey carries the checked declaration of the capability call on
// its way to its run (the approve step puts it there once approved; the
// run's start reads it). runKey carries it in the run's inner calls.
type (
	upFrontKey struct{}
	runKey     struct{}
)

// WithUpFront is ctx carrying d for the start of d.Capability's run.
func WithUpFront(ctx context.Context, d *Declared) context.Context {
	return context.WithValue(ctx, upFrontKey{}, d)
}

// UpFrontOf is the declaration ctx carries for the run of tool, or nil
// (none, or one for another tool: a run started by an inner call of a
// run never takes its parent's).
func UpFrontOf(ctx context.Context, tool string) *Declared {
	d, _ := ctx.Value(upFrontKey{}).(*Declared)
	if d == nil || d.Capability != tool {
		return nil
	}
	return d
}

// WithRun is ctx for the inner calls of a run started with d.
func WithRun(ctx context.Context, d *Declared) context.Context {
	return context.WithValue(ctx, runKey{}, d)
}

// RunOf is the declaration of the run that makes this call, or nil (not
// an inner call, or of a run that declared nothing).
func RunOf(ctx context.Context) *Declared {
	d, _ := ctx.Value(runKey{}).(*Declared)
	return d
}
