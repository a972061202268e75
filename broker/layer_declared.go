package broker

import (
	"context"
	"fmt"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/audit"
)

// declaredLayer checks a capability's declared tools (its registry
// entry's tools_used and client_tools) against the permissions before
// its run starts (seed 000 story 14.3 AC4-6): one denied and the run is
// refused here, before any container, with the one audit entry of the
// call; those asked go with the call (Call.UpFront) to the approve
// step, which puts them to the person in the capability's one approval.
// A tool that declares nothing goes on as it came.
//
// The servers a capability requires (its mcp_deps) are checked here too:
// a deny pattern that covers a whole server ("memory:*", "*") refuses
// the run the same way, naming the server and the pattern, since every
// call the capability could make to it would be denied. A narrower deny
// ("memory:delete_entities") refuses nothing up front: the server's
// other tools may be all the capability uses, and each call is decided
// on its own as always.
type declaredLayer struct {
	next  call.Handler
	decls declarations
	perms declaredPermissions
}

// declarations are what the deno capabilities declare (tools.Registry).
type declarations interface {
	// DeclaredBy is what tool's capability declares, nil for a tool of no
	// capability or one that declares nothing.
	DeclaredBy(tool string) []string
	// RequiredBy are the servers tool's capability requires (its
	// mcp_deps), nil for any other tool.
	RequiredBy(tool string) []string
}

// declaredPermissions are the permissions the declared step decides
// with (permit.LivePermissions).
type declaredPermissions interface {
	Decide(tool string) (call.Decision, string)
	DeniesServer(ns string) string
	Source() string
}

func (l declaredLayer) Call(ctx context.Context, c *call.Call) call.Result {
	servers := l.decls.RequiredBy(c.Tool)
	for _, ns := range servers {
		if pat := l.perms.DeniesServer(ns); pat != "" {
			src := l.perms.Source()
			c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Denied, Pattern: pat, ArgKeys: audit.Keys(c.Args),
				Reason: fmt.Sprintf("requires the MCP server %s (mcp_deps), every tool of which the deny pattern %q from %s denies", ns, pat, src)})
			return errorResult(fmt.Errorf("%w: %s was not run: its capability requires the MCP server %s (mcp_deps), and the deny pattern %q in %s denies every tool of %s; nothing ran. "+
				"Remove the pattern from permissions.deny there (or deny only the tools of %s it must not call) to run it", call.ErrDenied, c.Tool, ns, pat, src, ns, ns))
		}
	}
	tools := l.decls.DeclaredBy(c.Tool)
	if len(tools) == 0 {
		return l.next.Call(ctx, c)
	}
	d := &call.Declared{Capability: c.Tool, Tools: tools, Servers: servers}
	for _, t := range tools {
		switch dec, pat := l.perms.Decide(t); dec {
		case call.Deny:
			src := l.perms.Source()
			c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Denied, Pattern: pat, ArgKeys: audit.Keys(c.Args),
				Reason: fmt.Sprintf("declares %s, which matches the deny pattern %q from %s", t, pat, src)})
			return errorResult(fmt.Errorf("%w: %s was not run: its capability declares it calls %s (tools_used), which matches the deny pattern %q in %s; nothing ran. "+
				"Remove the pattern from permissions.deny there to run it, or use a capability that does not call %s", call.ErrDenied, c.Tool, t, pat, src, t))
		case call.Ask:
			d.Asked = append(d.Asked, t)
		}
	}
	c.UpFront = d
	return l.next.Call(ctx, c)
}
