package broker

import (
	"context"
	"fmt"

	"github.com/pml-dev/pml/internal/audit"
)

// resolveLayer finds where a tool comes from: the toolbox and shell
// tables, a configured MCP server, the cloud, or (not loaded yet) a
// registry. A name none of them can answer fails here as not found. A
// registry name is only marked: it is fetched after the permission
// check (registryLayer), so a denied name is never fetched.
type resolveLayer struct {
	b    *Broker
	next Handler
}

func (l resolveLayer) Call(ctx context.Context, c *Call) Result {
	b := l.b
	if b.hasTool(c.Tool) || b.serverOf(c.Tool) != nil || b.isCloudTool(c.Tool) {
		return l.next.Call(ctx, c)
	}
	if !registryCandidate(c.Tool) || !b.registryLookups() {
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: "no such tool"})
		return errorResult(fmt.Errorf("%w %q: tools/list (`pml tools` on the command line) shows the available tools", ErrNotFound, c.Tool))
	}
	c.FromRegistry = true
	return l.next.Call(ctx, c)
}
