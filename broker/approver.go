package broker

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/permit"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/protect"
	"github.com/pml-dev/pml/internal/trust"
)

// approver asks a person: it writes an approval's text (approval_text.go,
// access.go), puts it to the person in the client's dialog (dialog.go),
// turns an egress refusal into a network approval (approval_network.go)
// and applies the answer (answers.go), saving "always" in .pml.json
// (always.go, mounts.go). It holds the pieces it reads and, as functions,
// what it asks of the rest of the broker, never the *Broker: the call it
// approves runs through run, the execute step handed to it.
type approver struct {
	cfg *config.Config
	// ws, guard, egress and limitsNote are what it reads of the
	// sandbox: the workspace, the guard .pml.json is written through, the
	// egress proxies (their refusals, the hosts a person allows) and the
	// engine's resource limits as an approval tells them.
	ws         string
	guard      *protect.Guard
	egress     *egressSet
	limitsNote func(ctx context.Context) string
	perms      *LivePermissions
	trust      *trust.Store
	trustState *permit.TrustState
	deps       *deps.Store
	// log points at the broker's log: the log of the moment (tests
	// replace it after New).
	log *zerolog.Logger

	// run is the execute step (layer_execute.go, runTool): an approved
	// call runs there, noted with what let it through (approved, always),
	// its pattern and its workflow.
	run func(ctx context.Context, c *Call, name string, args map[string]any, decision, pattern, workflowID string) Result
	// reload applies the configuration again (a trust given since).
	reload func(env func(string) string)
	// serverOf gives the configuration of a tool's stdio server; ok is
	// false for a tool of no server.
	serverOf func(tool string) (srv config.Server, ok bool)
	// apiKeyApproval and integrityApproval describe the cloud's and the
	// registry's approvals; approveIntegrity carries out an approved
	// integrity change; resumeRun answers the inner call of a paused
	// code run.
	apiKeyApproval    func(wf *Workflow) Approval
	integrityApproval func(wf *Workflow) Approval
	approveIntegrity  func(ctx context.Context, c *Call, wfs *Workflows, wf *Workflow) Result
	resumeRun         func(ctx context.Context, c *Call, wfs *Workflows, wf *Workflow, pc *pausedCall, approved, always bool) Result
}

// approverOf builds b's approver, once the servers (and so the
// dependency store) are set up.
func approverOf(b *Broker) *approver {
	return &approver{
		cfg:        b.cfg,
		ws:         b.sb.ws,
		guard:      b.sb.guard,
		egress:     b.sb.egress,
		limitsNote: b.sb.limitsNote,
		perms:      b.perms,
		trust:      b.trust,
		trustState: &b.trustState,
		deps:       b.deps,
		log:        &b.log,
		run:        b.runTool,
		reload:     b.Reload,
		serverOf: func(tool string) (config.Server, bool) {
			if srv := b.serverOf(tool); srv != nil {
				return srv.cfg, true
			}
			return config.Server{}, false
		},
		apiKeyApproval:    b.apiKeyApproval,
		integrityApproval: b.integrityApproval,
		approveIntegrity:  b.approveIntegrity,
		resumeRun:         b.resumeRun,
	}
}
