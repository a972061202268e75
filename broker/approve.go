package broker

import (
	"context"

	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/broker/workflow"

	"github.com/pml-dev/pml/broker/approve"
	sbx "github.com/pml-dev/pml/broker/sandbox"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/toolbox"
)

// Asking a person lives in package approve; these names keep the
// broker's facade (cmd/pml, tests) as it was.

// ApprovalNetwork: a server or shell:exec tried to reach a host:port its
// network.allow does not name; pml's egress proxy refused it.
const ApprovalNetwork = approve.ApprovalNetwork

// approverOf builds b's approver, once the servers (and so the
// dependency store) are set up: what it asks of the rest of the broker is
// wired here (approverParts); its Execute handler is set when the path is
// built (path.go).
func approverOf(b *Broker) *approve.Approver {
	parts := approverParts{sb: b.sb, srv: b.srv, cloud: b.cloud, registry: b.registry}
	return &approve.Approver{
		Config:        b.cfg,
		Workspace:     b.sb.Workspace,
		Guard:         b.sb.Guard,
		Egress:        b.sb.Egress,
		Perms:         b.perms,
		Trust:         b.trust,
		TrustState:    &b.trustState,
		Deps:          b.srv.Deps,
		Log:           &b.log,
		Sandbox:       parts,
		Servers:       parts,
		Cloud:         parts,
		Integrity:     parts,
		ToolChanges:   b.pins,
		Reload:        b.Reload,
		GrantApproval: b.registry.GrantApproval,
		RecordGrant:   b.registry.RecordGrant,
		ShellTool:     sbx.ShellTool.Name,
		ExecuteTool:   ExecuteTool,
	}
}

// approverParts is what the approver asks of the broker's parts (the
// interfaces of approve/interfaces.go), over the parts themselves: never
// the *Broker.
type approverParts struct {
	sb       *sandbox
	srv      *tl.Servers
	cloud    *tl.Cloud
	registry *tl.Registry
}

func (p approverParts) LimitsNote(ctx context.Context) string { return p.sb.LimitsNote(ctx) }
func (p approverParts) OwnVariable(name string) bool          { return ownVariable(name) }

func (p approverParts) ServerOf(tool string) (config.Server, bool) {
	if srv := p.srv.ServerOf(tool); srv != nil {
		return srv.Cfg, true
	}
	return config.Server{}, false
}

func (p approverParts) IsCloudTool(tool string) bool { return p.cloud.IsCloudTool(tool) }

func (p approverParts) MissingKeys(ctx context.Context, tool string) []string {
	// The keys a cloud tool needs come with the cloud's tool list: a call
	// right after start (pml call, a fast client) waits for it as
	// tools/list does, so no key is left out.
	p.cloud.Wait(ctx)
	_, missing := byokFor(p.sb, p.cloud, tool)
	return missing
}

func (p approverParts) Enabled() bool { return p.cloud.Client.Enabled() }

func (p approverParts) Local(ctx context.Context, tool string, args map[string]any) call.Result {
	// No call's data is read on the way: local mode refuses it before
	// anything runs.
	return p.cloud.Exec().Run(ctx, nil, toolbox.Tool{Name: tool}, args)
}

func (p approverParts) APIKeyApproval(wf *workflow.Workflow) workflow.Approval {
	return p.cloud.APIKeyApproval(wf)
}

func (p approverParts) IntegrityApproval(wf *workflow.Workflow) workflow.Approval {
	return p.registry.IntegrityApproval(wf)
}

func (p approverParts) ApproveIntegrity(ctx context.Context, c *call.Call, wfs *workflow.Workflows, wf *workflow.Workflow) call.Result {
	return p.registry.ApproveIntegrity(ctx, c, wfs, wf)
}
