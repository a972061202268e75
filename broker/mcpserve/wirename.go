package mcpserve

import (
	"context"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"

	"github.com/pml-dev/pml/internal/wirename"
)

// listing keeps one MCP server's tool list in step with the broker: the
// tools its view shows, minus those permissions.deny refuses, each under
// its wire name (^[a-zA-Z0-9_-]{1,64}$, internal/wirename). Adding or
// removing a tool makes the SDK send notifications/tools/list_changed.
type listing struct {
	s       *mcp.Server
	x       *binding
	v       view
	names   *wirename.Table
	handler func(name string) mcp.ToolHandler

	mu sync.Mutex
	// shown maps each wire name registered with the SDK to pml's name.
	shown map[string]string
	// typed holds pml's names of the listed tools that have an output
	// schema (fitSchema).
	typed map[string]bool
	// exec maps a listed tool's wire name to its server's `execution`
	// (execution.go).
	exec map[string][]byte
}

func newListing(s *mcp.Server, x *binding, v view, handler func(string) mcp.ToolHandler) *listing {
	l := &listing{s: s, x: x, v: v, names: wirename.NewTable(v.prefix != ""), handler: handler, shown: map[string]string{}, typed: map[string]bool{}, exec: map[string][]byte{}}
	l.follow(x.get())
	return l
}

// follow lists b's tools from now on (the workspace moved to b, roots.go):
// tools b does not have are removed, its own added, and the SDK tells the
// client when that changed the list.
func (l *listing) follow(b Backend) {
	l.sync(nil)
	b.OnToolsChanged(func(added []tl.Tool, _ []string) {
		if l.x.get() == b {
			l.sync(added)
		}
	})
}

// wire returns the name a tool of pml (namespace:action) has on the
// wire in this view, and whether the view shows it.
func (l *listing) wire(name string) (string, bool) {
	return l.wireOf(name, l.names.Wire)
}

// wireOf is wire with the table's lookup given: Wire records the name
// (a tool listed), Peek does not (a name a client called, which may be
// no tool at all: recorded, it would take the wire name a real tool's
// shortened name has, and push that tool to another).
func (l *listing) wireOf(name string, lookup func(string) string) (string, bool) {
	shown, ok := l.v.show(name)
	if !ok {
		return "", false
	}
	if name == call.ContinueTool {
		return continueWire, true
	}
	if l.v.prefix == "" {
		return lookup(name), true
	}
	return lookup(shown), true
}

// visible reports whether a tool is listed: permissions.deny hides it
// (a call still answers "denied"). pml:continue_workflow is always listed:
// approvals need it.
func (l *listing) visible(name string) bool {
	if name == call.ContinueTool {
		return true
	}
	d := l.x.get().Decide(name)
	return d != call.Deny
}

// sync registers with the SDK the tools that should be listed and are
// not, re-registers those in changed (their definition changed), and
// removes the rest. The SDK tells the clients when anything changed.
func (l *listing) sync(changed []tl.Tool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	redo := map[string]bool{}
	for _, t := range changed {
		redo[t.Name] = true
	}
	want := map[string]bool{}
	for _, t := range l.x.get().Tools() {
		w, ok := l.wire(t.Name)
		if !ok || !l.visible(t.Name) {
			continue
		}
		want[w] = true
		if len(t.Execution) > 0 {
			l.exec[w] = t.Execution
		} else {
			delete(l.exec, w)
		}
		if _, has := l.shown[w]; has && !redo[t.Name] {
			continue
		}
		l.s.AddTool(mcpTool(w, t), l.handler(t.Name))
		l.shown[w] = t.Name
		l.typed[t.Name] = len(t.OutputSchema) > 0
	}
	var gone []string
	for w, name := range l.shown {
		if !want[w] {
			gone = append(gone, w)
			delete(l.shown, w)
			delete(l.typed, name)
			delete(l.exec, w)
		}
	}
	if len(gone) > 0 {
		l.s.RemoveTools(gone...)
	}
}

// mcpTool is t as tools/list shows it under its wire name: everything a
// server listed passes (title, annotations, output schema, _meta, icons),
// so extensions that announce themselves in a tool's _meta (MCP Apps'
// ui.resourceUri) work through pml. The go-sdk sends a nil OutputSchema
// as absent.
func mcpTool(wire string, t tl.Tool) *mcp.Tool {
	out := &mcp.Tool{Name: wire, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, Annotations: t.Annotations,
		Meta: t.Meta, Icons: t.Icons}
	if len(t.OutputSchema) > 0 {
		out.OutputSchema = t.OutputSchema
	}
	return out
}

// fitSchema keeps pml's own answer to a call of a tool with an output
// schema (an approval_required, a rejection: results the tool did not
// make) from being checked as the tool's output. A client checks the
// structuredContent of such a tool's result against its outputSchema,
// and refuses a result that is not an error and has none (the
// TypeScript and Python SDKs do, failing the call with a protocol error
// the model never reads): pml's answer goes as an error result with its
// text alone (the text says all the structured content did: what is
// asked, the workflow_id, how to answer). A server's own result
// (res.Upstream, res.Raw) passes as it came.
func (l *listing) fitSchema(name string, res call.Result, out *mcp.CallToolResult) *mcp.CallToolResult {
	if l == nil || out == nil || out.IsError || out.StructuredContent == nil || res.Upstream != nil || res.Raw != nil {
		return out
	}
	l.mu.Lock()
	typed := l.typed[name]
	l.mu.Unlock()
	if typed {
		out.IsError, out.StructuredContent = true, nil
	}
	return out
}

// resolve maps the name a client called to pml's name, and returns the
// wire name the tool is listed under ("" when it is not listed: denied,
// not registered yet, or unknown). A name in pml's own form
// (namespace:action), which clients used before wire names, still works
// for one release, with a warning.
func (l *listing) resolve(called string) (name, listed string) {
	if called == continueWire {
		name = call.ContinueTool
	} else if strings.Contains(called, ":") {
		name = l.v.internal(called)
		warnOldName(*l.x.get().Log(), called)
	} else if n, ok := l.names.Name(called); ok {
		name = l.v.internal(n)
	} else {
		return "", ""
	}
	w, ok := l.wireOf(name, l.names.Peek)
	if !ok {
		return name, ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shown[w] == name {
		return name, w
	}
	return name, ""
}

// resolveCold is resolve for a wire name this process has not handed out
// yet: a shortened one (a hash of the full name, internal/wirename) that
// a client read from another process's tools/list (a stateless client on
// MCP 2026-07-28 may list on one `pml serve` and call on another, or
// start a new `pml stdio` and call what it listed before). The name is
// found from the configuration: the wire names of the tools known now
// are computed, and when none matches the configured servers are started
// as a first tools/list starts them, and their names computed (only for
// a name of the shortened form: a name in the exact form decodes by
// itself, and its server starts when it is called). A name that matches
// nothing resolves as before.
func (l *listing) resolveCold(ctx context.Context, called string) (name, listed string) {
	if !wirename.Pattern.MatchString(called) {
		return l.resolve(called)
	}
	l.sync(nil)
	if name, listed = l.resolve(called); listed != "" || !wirename.Shortened(called) {
		return name, listed
	}
	l.x.get().Prepare(ctx)
	l.sync(nil)
	if n, w := l.resolve(called); w != "" {
		return n, w
	}
	return name, listed
}

// continueWire is pml:continue_workflow on the wire, in every view.
var continueWire = wirename.Encode(call.ContinueTool)

// oldNames remembers the namespace:action names clients called, so each
// is warned about once.
var oldNames sync.Map

// warnOldName logs, once per name, that a client called a tool by pml's
// own name instead of its wire name.
func warnOldName(log zerolog.Logger, called string) {
	// Load first: a name seen already (every call of such a client)
	// costs no boxing of the name for LoadOrStore.
	if _, seen := oldNames.Load(called); seen {
		return
	}
	if _, seen := oldNames.LoadOrStore(called, true); seen {
		return
	}
	log.Warn().Str("tool", called).Str("wire_name", wirename.Encode(called)).
		Msg("the client called a tool by its old name with ':', which the MCP spec does not allow; it still works in this release, but clients should use the name tools/list shows")
}
