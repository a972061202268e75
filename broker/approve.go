package broker

import (
	"context"

	"github.com/pml-dev/pml/broker/approve"
	sbx "github.com/pml-dev/pml/broker/sandbox"
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
		Workspace:  b.sb.Workspace,
		Guard:      b.sb.Guard,
		Egress:     b.sb.Egress,
		LimitsNote: b.sb.LimitsNote,
		Perms:      b.perms,
		Trust:      b.trust,
		TrustState: &b.trustState,
		Deps:       b.srv.deps,
		Log:        &b.log,
		Run:        b.runTool,
		Reload:     b.Reload,
		ServerOf: func(tool string) (config.Server, bool) {
			if srv := b.srv.serverOf(tool); srv != nil {
				return srv.cfg, true
			}
			return config.Server{}, false
		},
		APIKeyApproval:    b.cloud.apiKeyApproval,
		IntegrityApproval: b.registry.integrityApproval,
		ApproveIntegrity:  b.registry.approveIntegrity,
		GrantApproval:     b.grantApproval,
		RecordGrant:       b.recordGrant,
		Paused: func(wf *Workflow) bool {
			_, ok := wf.Data.(*pausedCall)
			return ok
		},
		ResumeRun: func(ctx context.Context, c *Call, wfs *Workflows, wf *Workflow, approved, always bool) Result {
			return wf.Data.(*pausedCall).Resume(ctx, c, wfs, wf, approved, always)
		},
		ShellTool:   sbx.ShellTool.Name,
		ExecuteTool: ExecuteTool,
		OwnVariable: ownVariable,
	}
}
