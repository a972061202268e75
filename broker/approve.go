package broker

import (
	"context"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/internal/config"
)

// Asking a person lives in package approve; these names keep the
// broker's facade (cmd/pml, tests) as it was.

// ApprovalNetwork: a server or shell:exec tried to reach a host:port its
// network.allow does not name; pml's egress proxy refused it.
const ApprovalNetwork = approve.ApprovalNetwork

// approverOf builds b's approver, once the servers (and so the
// dependency store) are set up: what it asks of the rest of the broker
// is wired here, the execute step (runTool) first.
func approverOf(b *Broker) *approve.Approver {
	return &approve.Approver{
		Config:     b.cfg,
		Workspace:  b.sb.ws,
		Guard:      b.sb.guard,
		Egress:     b.sb.egress,
		LimitsNote: b.sb.limitsNote,
		Perms:      b.perms,
		Trust:      b.trust,
		TrustState: &b.trustState,
		Deps:       b.srv.Deps,
		Log:        &b.log,
		Run:        b.runTool,
		Reload:     b.Reload,
		ServerOf: func(tool string) (config.Server, bool) {
			if srv := b.srv.ServerOf(tool); srv != nil {
				return srv.Cfg, true
			}
			return config.Server{}, false
		},
		APIKeyApproval:    b.cloud.APIKeyApproval,
		IntegrityApproval: b.registry.IntegrityApproval,
		ApproveIntegrity:  b.registry.ApproveIntegrity,
		GrantApproval:     b.registry.GrantApproval,
		RecordGrant:       b.registry.RecordGrant,
		Paused: func(wf *Workflow) bool {
			_, ok := wf.Data.(*pausedCall)
			return ok
		},
		ResumeRun: func(ctx context.Context, c *Call, wfs *Workflows, wf *Workflow, approved, always bool) Result {
			return wf.Data.(*pausedCall).Resume(ctx, c, wfs, wf, approved, always)
		},
		ShellTool:   shellTool.Name,
		ExecuteTool: ExecuteTool,
		OwnVariable: ownVariable,
	}
}
