package approve

import (
	"context"
	"fmt"
	"strings"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/audit"
)

// Up-front approval (seed 000 story 14.3 AC4-6): a capability declares
// the tools its code calls; broker's declared step refused the run if one
// is denied, and hands the approve step the ones that ask. They are put
// to the person in one approval, the capability's own, and once it is
// approved the run starts with them approved (call.Call.UpFront): its
// declared calls do not ask again during that run. A call it did not
// declare asks on its own, as any call.

// declaredAsked is the declaration of tool's capability when some of
// its declared tools ask, else nil.
func declaredAsked(c *Call) *call.Declared {
	d := c.UpFrontFor(c.Tool)
	if d == nil || len(d.Asked) == 0 {
		return nil
	}
	return d
}

// alwaysNotForDeclared is why "always" is not offered for an approval
// of declared tools: it covers one run, and "always" would have to allow
// each of those tools for every caller.
const alwaysNotForDeclared = "this approval covers the tools the capability declares for one run only; to stop being asked, add them to permissions.allow"

// withDeclared adds to the approval of a capability's call the declared
// tools it approves for the run.
func withDeclared(a *Approval, d *call.Declared) {
	asked := make([]string, len(d.Asked))
	for i, t := range d.Asked {
		asked[i] = shown(t)
	}
	who := "It declares"
	if d.Held != nil {
		who = "The code the cloud sent declares"
	}
	a.Description += fmt.Sprintf(" %s (tools_used) that its code calls %s, which your permissions ask about: approving starts the run with %s approved for this run only, asked once here; a call it did not declare is asked about on its own.",
		who, strings.Join(asked, ", "), plural(len(asked), "that call", "those calls"))
	if a.Context == nil {
		a.Context = map[string]any{}
	}
	a.Context["declared_tools"] = d.Tools
	a.Context["asked_tools"] = d.Asked
	a.Options = []string{"continue", "abort"}
	a.Context["always_not_offered"] = alwaysNotForDeclared
}

// UpFrontApproval puts to the person, once, the tools that ask among
// those the code of a pml:execute run declares (d, which holds the
// cloud's answer): approved, the held code runs with them approved for
// that run (Answer, then call.Call.UpFront), and the cloud is not asked
// again. Nothing has run yet.
func (ap *Approver) UpFrontApproval(ctx context.Context, c *Call, tool string, args map[string]any, pattern string, d *call.Declared) Result {
	if c.RawArgs {
		c.DecodeArgs()
		args = c.Args
	}
	if res, refused := ap.NeedsDialog(c, tool, pattern, args); refused {
		return res
	}
	wf := c.Req.Workflows.Create(ApprovalToolPermission, tool, args, pattern)
	wf.Data = d
	a := ap.ApprovalFor(wf)
	c.Note(audit.Entry{Tool: tool, Decision: audit.Asked, Pattern: pattern, WorkflowID: wf.ID, Reason: "declared tools ask: " + strings.Join(d.Asked, ", "), ArgKeys: audit.Keys(args)})
	return ap.AskInDialog(ctx, c, wf, a)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// deniedSince refuses a run approved up front when one of its declared
// tools, or a whole server it requires, has been denied while the
// approval waited (a reload, another answer): the run would otherwise
// start and meet the refusal halfway.
func (ap *Approver) deniedSince(c *Call, wf *Workflow, d *call.Declared) (Result, bool) {
	for _, ns := range d.Servers {
		if pat := ap.Perms.DeniesServer(ns); pat != "" {
			src := ap.Perms.Source()
			c.Note(audit.Entry{Tool: wf.Tool, Decision: audit.Denied, Pattern: pat, WorkflowID: wf.ID, ArgKeys: audit.Keys(wf.Args),
				Reason: fmt.Sprintf("requires the MCP server %s (mcp_deps), every tool of which the deny pattern %q from %s denies", ns, pat, src)})
			return errorResult(fmt.Errorf("%w: %s was not run: its capability requires the MCP server %s (mcp_deps), and the deny pattern %q in %s now denies every tool of %s; nothing ran", call.ErrDenied, wf.Tool, ns, pat, src, ns)), true
		}
	}
	for _, t := range d.Tools {
		if dec, pat := ap.Perms.Decide(t); dec == call.Deny {
			src := ap.Perms.Source()
			c.Note(audit.Entry{Tool: wf.Tool, Decision: audit.Denied, Pattern: pat, WorkflowID: wf.ID, ArgKeys: audit.Keys(wf.Args),
				Reason: fmt.Sprintf("declares %s, which matches the deny pattern %q from %s", t, pat, src)})
			return errorResult(fmt.Errorf("%w: %s was not run: its capability declares it calls %s (tools_used), which now matches the deny pattern %q in %s; nothing ran", call.ErrDenied, wf.Tool, t, pat, src)), true
		}
	}
	return Result{}, false
}
