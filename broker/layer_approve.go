package broker

import (
	"context"

	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/toolbox"
)

// approveLayer decides whether a permitted call needs a person first:
// an ask permission, a server whose install is not approved (unless its
// tools are allowed outright), or a cloud tool whose API key is missing.
// It then puts the approval to the person (dialog.go) or returns
// approval_required; otherwise the call goes on to be executed. A cloud
// tool in local mode fails here: asking a person to approve a call that
// cannot run would only waste their answer.
type approveLayer struct {
	b    *Broker
	next Handler
}

func (l approveLayer) Call(ctx context.Context, c *Call) Result {
	b := l.b
	srv := b.serverOf(c.Tool)
	needsInstall := srv != nil && !b.deps.Installed(srv.cfg)
	cloudish := b.isCloudTool(c.Tool)
	var missingKeys []string
	if cloudish {
		// The keys a cloud tool needs come with the cloud's tool list: a
		// call right after start (pml call, a fast client) waits for it
		// as tools/list does, so no key is left out.
		b.waitCloud(ctx)
		_, missingKeys = byokFor(b.sb, b.cloud, c.Tool)
	}
	switch {
	case cloudish && !b.cloud.client.Enabled():
		c.DecodeArgs()
		res := b.cloud.exec.run(ctx, toolbox.Tool{Name: c.Tool}, c.Args)
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Pattern: c.Pattern, Reason: "local mode", ArgKeys: audit.Keys(c.Args)})
		return res
	case c.Decision == Ask || needsInstall && c.Decision != Allow || len(missingKeys) > 0:
		typ := ApprovalToolPermission
		switch {
		case needsInstall:
			typ = ApprovalDependency
		case len(missingKeys) > 0 && c.Decision != Ask:
			typ = ApprovalAPIKey
		}
		return l.ask(ctx, c, typ)
	}
	return l.next.Call(ctx, c)
}

// ask opens a workflow of typ for the call and puts it to the person.
func (l approveLayer) ask(ctx context.Context, c *Call, typ ApprovalType) Result {
	b := l.b
	c.DecodeArgs()
	if res, refused := b.needsDialog(c, c.Tool, c.Pattern, c.Args); refused {
		return res
	}
	wf := c.Req.Workflows.Create(typ, c.Tool, c.Args, c.Pattern)
	approval := b.approvalFor(wf)
	c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Asked, Pattern: c.Pattern, WorkflowID: wf.ID, ArgKeys: audit.Keys(c.Args)})
	return b.askInDialog(ctx, c, wf, approval)
}
