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
	next Handler
	// known: the toolbox or shell table, a configured server or the
	// cloud has the tool.
	known func(tool string) bool
	// registryName: the name is one a registry may provide, and registry
	// lookups are on.
	registryName func(tool string) bool
}

func (l resolveLayer) Call(ctx context.Context, c *Call) Result {
	if l.known(c.Tool) {
		return l.next.Call(ctx, c)
	}
	if !l.registryName(c.Tool) {
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: "no such tool"})
		return errorResult(fmt.Errorf("%w %q: tools/list (`pml tools` on the command line) shows the available tools", ErrNotFound, c.Tool))
	}
	c.FromRegistry = true
	return l.next.Call(ctx, c)
}
