package approve

import (
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
// (always.go, config_write.go). It holds the pieces it reads and, as the
// small interfaces below, what it asks of the rest of pml: the call it
// approves runs through Execute, the handler it was given. The broker
// builds it once (every field set); it is then safe for concurrent use.
type Approver struct {
	Config *config.Config
	// Workspace, Guard and Egress are what it reads of the sandbox: the
	// workspace, the guard .pml.json is written through, the egress
	// proxies (their refusals, the hosts a person allows).
	Workspace  string
	Guard      *protect.Guard
	Egress     *EgressSet
	Perms      *permit.LivePermissions
	Trust      *trust.Store
	TrustState *permit.TrustState
	Deps       *deps.Store
	// Log points at the broker's log: the log of the moment (tests
	// replace it after New).
	Log *zerolog.Logger

	// Execute is the handler an approved call runs through: the execute
	// step wrapped in the network approval (Network), so that a call run
	// again after an answer can ask again. Set once, before the first
	// call (the broker's path builds the wrapper around its execute step).
	Execute Handler
	// Sandbox, Servers, Cloud and Integrity are the parts of pml an
	// approval tells of or hands an approved change to (interfaces.go).
	Sandbox   Sandbox
	Servers   Servers
	Cloud     Cloud
	Integrity Integrity
	// ToolChanges describes and accepts a held tool definition
	// (ApprovalToolChange; broker/tools/layer_pin.go).
	ToolChanges ToolChanges
	// Reload applies the configuration again (a trust given since).
	Reload func(env func(string) string)
	// GrantApproval describes what a registry entry asks of this
	// machine (its workflow's Data, from Layer.GrantNeeded); RecordGrant
	// records it as the person's grant, outside the workspace.
	GrantApproval func(wf *Workflow) Approval
	RecordGrant   func(wf *Workflow) error
	// ShellTool and ExecuteTool are the names of shell:exec and
	// pml:execute.
	ShellTool, ExecuteTool string
}
