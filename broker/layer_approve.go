package broker

import (
	"context"

	"github.com/pml-dev/pml/internal/audit"
)

// approveLayer decides whether a permitted call needs a person first:
// an ask permission, a server whose install is not approved (unless its
// tools are allowed outright), or a cloud tool whose API key is missing.
// It then puts the approval to the person (dialog.go) or returns
// approval_required; otherwise the call goes on to be executed. A cloud
// tool in local mode fails here: asking a person to approve a call that
// cannot run would only waste their answer.
type approveLayer struct {
	next Handler
	// needsInstall: the tool's server has dependencies not installed yet.
	needsInstall func(tool string) bool
	// cloudTool: the tool is the cloud's; missingKeys the API keys it
	// needs that the person has not given (it waits for the cloud's tool
	// list); cloudOn whether the cloud is enabled, else local runs the
	// tool locally, which fails it.
	cloudTool   func(tool string) bool
	missingKeys func(ctx context.Context, tool string) []string
	cloudOn     func() bool
	local       func(ctx context.Context, tool string, args map[string]any) Result
	asking      asking
}

func (l approveLayer) Call(ctx context.Context, c *Call) Result {
	needsInstall := l.needsInstall(c.Tool)
	cloudish := l.cloudTool(c.Tool)
	var missingKeys []string
	if cloudish {
		missingKeys = l.missingKeys(ctx, c.Tool)
	}
	switch {
	case cloudish && !l.cloudOn():
		c.DecodeArgs()
		res := l.local(ctx, c.Tool, c.Args)
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
	c.DecodeArgs()
	if res, refused := l.asking.needsDialog(c, c.Tool, c.Pattern, c.Args); refused {
		return res
	}
	wf := c.Req.Workflows.Create(typ, c.Tool, c.Args, c.Pattern)
	approval := l.asking.approval(wf)
	c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Asked, Pattern: c.Pattern, WorkflowID: wf.ID, ArgKeys: audit.Keys(c.Args)})
	return l.asking.inDialog(ctx, c, wf, approval)
}
