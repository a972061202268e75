package approve

import (
	"context"

	"github.com/pml-dev/pml/internal/config"
)

// What approve asks of the rest of pml, each named for the part that
// offers it. The broker implements them over its own parts (broker's
// approve.go); the tests here fake them.

// Sandbox is what an approval tells of the sandbox.
type Sandbox interface {
	// LimitsNote is "" when the engine enforces the policy's resource
	// limits, else what it does not.
	LimitsNote(ctx context.Context) string
	// OwnVariable says whether an environment variable is pml's own (not
	// the server's, so not shown).
	OwnVariable(name string) bool
}

// Servers are the configured stdio servers.
type Servers interface {
	// ServerOf gives the configuration of a tool's stdio server; ok is
	// false for a tool of no server.
	ServerOf(tool string) (srv config.Server, ok bool)
}

// Cloud is pml's cloud side, as the approve step meets it: its tools,
// the API keys they need, and local mode.
type Cloud interface {
	// IsCloudTool: the tool is the cloud's.
	IsCloudTool(tool string) bool
	// MissingKeys are the API keys tool needs that the person has not
	// given (it waits for the cloud's tool list).
	MissingKeys(ctx context.Context, tool string) []string
	// Enabled: the cloud is on; else Local runs a cloud tool locally,
	// which fails it.
	Enabled() bool
	Local(ctx context.Context, tool string, args map[string]any) Result
	// APIKeyApproval describes an approval of type api_key.
	APIKeyApproval(wf *Workflow) Approval
}

// ToolChanges are the pinned tool definitions: it describes the approval
// of a held tool (what changed), and pins and runs an accepted one.
type ToolChanges interface {
	ToolChangeApproval(wf *Workflow) Approval
	AcceptToolChange(ctx context.Context, c *Call, wfs *Workflows, wf *Workflow) Result
}

// Integrity is the registry side's integrity check: it describes an
// approval of a changed entry, and carries out an approved one.
type Integrity interface {
	IntegrityApproval(wf *Workflow) Approval
	ApproveIntegrity(ctx context.Context, c *Call, wfs *Workflows, wf *Workflow) Result
}

// Resumer is a workflow's payload (Workflow.Data) that carries out the
// person's answer itself: Answer hands the answer to it, whatever the
// workflow's type. A paused code run (coderun.PausedCall) resumes the
// same run; a network approval (networkGrant) allows its hosts and runs
// the call again. ap is the approver that took the answer, for what the
// payload applies through it; c is the call that answered.
type Resumer interface {
	Resume(ctx context.Context, ap *Approver, c *Call, wfs *Workflows, wf *Workflow, a Answer) Result
}
