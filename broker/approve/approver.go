package approve

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/permit"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/protect"
	"github.com/pml-dev/pml/internal/trust"
)

// Approver asks a person: it writes an approval's text (approval_text.go,
// access.go), puts it to the person in the client's dialog (dialog.go),
// turns an egress refusal into a network approval (approval_network.go)
// and applies the answer (answers.go), saving "always" in .pml.json
// (always.go, config_write.go). It holds the pieces it reads and, as
// functions, what it asks of the rest of pml: the call it approves runs
// through Run, the execute step handed to it. The broker builds it once
// (every field set); it is then safe for concurrent use.
type Approver struct {
	Config *config.Config
	// Workspace, Guard, Egress and LimitsNote are what it reads of the
	// sandbox: the workspace, the guard .pml.json is written through, the
	// egress proxies (their refusals, the hosts a person allows) and the
	// engine's resource limits as an approval tells them.
	Workspace  string
	Guard      *protect.Guard
	Egress     *EgressSet
	LimitsNote func(ctx context.Context) string
	Perms      *permit.LivePermissions
	Trust      *trust.Store
	TrustState *permit.TrustState
	Deps       *deps.Store
	// Log points at the broker's log: the log of the moment (tests
	// replace it after New).
	Log *zerolog.Logger

	// Run is the execute step (the broker's runTool): an approved call
	// runs there, noted with what let it through (approved, always), its
	// pattern and its workflow.
	Run func(ctx context.Context, c *Call, name string, args map[string]any, decision, pattern, workflowID string) Result
	// Reload applies the configuration again (a trust given since).
	Reload func(env func(string) string)
	// ServerOf gives the configuration of a tool's stdio server; ok is
	// false for a tool of no server.
	ServerOf func(tool string) (srv config.Server, ok bool)
	// APIKeyApproval and IntegrityApproval describe the cloud's and the
	// registry's approvals; ApproveIntegrity carries out an approved
	// integrity change.
	APIKeyApproval    func(wf *Workflow) Approval
	IntegrityApproval func(wf *Workflow) Approval
	ApproveIntegrity  func(ctx context.Context, c *Call, wfs *Workflows, wf *Workflow) Result
	// GrantApproval describes what a registry entry asks of this
	// machine (its workflow's Data, from Layer.GrantNeeded); RecordGrant
	// records it as the person's grant, outside the workspace.
	GrantApproval func(wf *Workflow) Approval
	RecordGrant   func(wf *Workflow) error
	// Paused says whether wf holds the inner call of a paused code run,
	// which ResumeRun answers (the run goes on or stops).
	Paused    func(wf *Workflow) bool
	ResumeRun func(ctx context.Context, c *Call, wfs *Workflows, wf *Workflow, approved, always bool) Result
	// ShellTool and ExecuteTool are the names of shell:exec and
	// pml:execute; OwnVariable says whether an environment variable is
	// pml's own (not the server's, so not shown).
	ShellTool, ExecuteTool string
	OwnVariable            func(name string) bool
}
