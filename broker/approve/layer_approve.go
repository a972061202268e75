package approve

import (
	"context"

	"github.com/pml-dev/pml/broker/call"

	"github.com/pml-dev/pml/internal/audit"
)

// Layer is the approve layer of the request path. It decides whether a permitted call needs a person first:
// an ask permission, a server whose install is not approved (unless its
// tools are allowed outright), or a cloud tool whose API key is missing.
// It then puts the approval to the person (dialog.go) or returns
// approval_required; otherwise the call goes on to be executed. A cloud
// tool in local mode fails here: asking a person to approve a call that
// cannot run would only waste their answer.
type Layer struct {
	// Next is the execute step, wrapped in the network approval (the
	// same handler as Ask.Execute).
	Next Handler
	// GrantNeeded: the tool's registry entry asks for host variables,
	// network or an image the person has not granted; grant is what it
	// asks (the workflow's Data). Asked before anything else, whatever
	// the tool's permission: an allow pattern is not that grant.
	GrantNeeded func(tool string) (grant any, needed bool)
	// Ask puts the approval to the person; what the layer asks of the
	// servers (an install due) and the cloud (its keys, local mode) it
	// reads through Ask's Servers and Cloud.
	Ask *Approver
}

func (l Layer) Call(ctx context.Context, c *Call) Result {
	// An install due makes an allowed call ask only when it asks for
	// something else too (then as the dependency's approval): an allowed
	// call, the warm call's case, does not read the install state here.
	needsInstall := c.Decision != call.Allow && l.Ask.needsInstall(c.Tool)
	cloud := l.Ask.Cloud
	cloudish := cloud.IsCloudTool(c.Tool)
	var missingKeys []string
	if cloudish {
		missingKeys = cloud.MissingKeys(ctx, c.Tool)
	}
	// An inner call of a capability's run that the capability declared
	// and a person approved before the run started does not ask again;
	// a capability's own declared tools that ask are put to the person
	// in its one approval (upfront.go).
	run := c.Req.Run
	approvedBefore := c.Decision == call.Ask && run.ApprovedUpFront(c.Tool)
	declared := declaredAsked(c)
	switch {
	case cloudish && !cloud.Enabled():
		c.DecodeArgs()
		res := cloud.Local(ctx, c.Tool, c.Args)
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Pattern: c.Pattern, Reason: "local mode", ArgKeys: audit.Keys(c.Args)})
		return res
	case l.grantNeeded(c):
		return l.askGrant(ctx, c)
	case c.Decision == call.Ask && !approvedBefore || declared != nil || needsInstall || len(missingKeys) > 0:
		typ := ApprovalToolPermission
		switch {
		case needsInstall || c.Decision == call.Allow && l.Ask.needsInstall(c.Tool):
			typ = ApprovalDependency
		case len(missingKeys) > 0 && c.Decision != call.Ask:
			typ = ApprovalAPIKey
		}
		return l.ask(ctx, c, typ, declared)
	}
	if approvedBefore {
		c.DecodeArgs()
		return l.Ask.let(ctx, c, c, audit.Approved, run.WorkflowID)
	}
	return l.Next.Call(ctx, c)
}

// needsInstall reports whether tool's server has dependencies not
// installed yet.
func (ap *Approver) needsInstall(tool string) bool {
	srv, ok := ap.Servers.ServerOf(tool)
	return ok && !ap.Deps.Installed(srv)
}

// grantNeeded reports whether the call's registry entry needs the
// person's grant first.
func (l Layer) grantNeeded(c *Call) bool {
	if l.GrantNeeded == nil {
		return false
	}
	_, need := l.GrantNeeded(c.Tool)
	return need
}

// askGrant puts what the call's registry entry asks of this machine to
// the person; approved, it is recorded and the call runs (the approval
// names the call, so it is the call's approval too).
func (l Layer) askGrant(ctx context.Context, c *Call) Result {
	c.DecodeArgs()
	if res, refused := l.Ask.NeedsDialog(c, c.Tool, c.Pattern, c.Args); refused {
		return res
	}
	g, _ := l.GrantNeeded(c.Tool)
	wf := c.Req.Workflows.Create(ApprovalRegistryGrant, c.Tool, c.Args, c.Pattern)
	wf.Data = g
	approval := l.Ask.ApprovalFor(wf)
	c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Asked, Pattern: c.Pattern, WorkflowID: wf.ID, Reason: "registry grant", ArgKeys: audit.Keys(c.Args)})
	return l.Ask.AskInDialog(ctx, c, wf, approval)
}

// ask opens a workflow of typ for the call and puts it to the person.
// declared, when not nil, are a capability's declared tools that ask:
// the workflow carries them (Answer starts the run with them approved).
func (l Layer) ask(ctx context.Context, c *Call, typ ApprovalType, declared *call.Declared) Result {
	c.DecodeArgs()
	if res, refused := l.Ask.NeedsDialog(c, c.Tool, c.Pattern, c.Args); refused {
		return res
	}
	wf := c.Req.Workflows.Create(typ, c.Tool, c.Args, c.Pattern)
	if declared != nil {
		wf.Data = declared
	}
	approval := l.Ask.ApprovalFor(wf)
	c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Asked, Pattern: c.Pattern, WorkflowID: wf.ID, ArgKeys: audit.Keys(c.Args)})
	return l.Ask.AskInDialog(ctx, c, wf, approval)
}
