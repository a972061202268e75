package tools

import (
	"context"
	"fmt"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/audit"
)

// ResolveLayer finds where a tool comes from: the toolbox and shell
// tables, a configured MCP server, the cloud, or (not loaded yet) a
// registry. A name none of them can answer fails here as not found. A
// registry name is only marked: it is fetched after the permission
// check (RegistryLayer), so a denied name is never fetched.
type ResolveLayer struct {
	Next  call.Handler
	Names Names
}

// Names say where a tool name comes from (broker wires the sources and
// the trust state).
type Names interface {
	// Known: the toolbox or shell table, a configured server or the
	// cloud has the tool.
	Known(tool string) bool
	// RegistryName: the name is one a registry may provide, and registry
	// lookups are on.
	RegistryName(tool string) bool
	// Withheld says why a tool none of them has would be offered by the
	// project's policy once trusted (a server of .pml.json's mcps, a
	// capability it names), or nil: such a call needs a person's trust,
	// not another name, and is refused before any registry is asked.
	Withheld(tool string) error
}

func (l ResolveLayer) Call(ctx context.Context, c *call.Call) call.Result {
	if c.Req.Kind != call.KindTool {
		// A prompt, resource or completion: its server's executor finds
		// it (or says it has none), after the permissions decided.
		return l.Next.Call(ctx, c)
	}
	if l.Names.Known(c.Tool) {
		return l.Next.Call(ctx, c)
	}
	if err := l.Names.Withheld(c.Tool); err != nil {
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: "not trusted"})
		return call.ResultFor(err)
	}
	if !l.Names.RegistryName(c.Tool) {
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: "no such tool"})
		return call.ResultFor(fmt.Errorf("%w %q: tools/list (`pml tools` on the command line) shows the available tools", call.ErrNotFound, c.Tool))
	}
	c.FromRegistry = true
	return l.Next.Call(ctx, c)
}
