package broker

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pml-dev/pml/internal/toolbox"
)

// registerServerTools makes a server's tools callable as server:tool and
// tells the MCP layer.
func (b *Broker) registerServerTools(srv *server, tools []*mcp.Tool) {
	var defs []toolbox.Tool
	for _, t := range tools {
		schema, _ := json.Marshal(t.InputSchema)
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		defs = append(defs, toolbox.Tool{Name: srv.cfg.Name + ":" + t.Name, Description: desc, InputSchema: schema})
	}
	srv.mu.Lock()
	old := srv.names
	srv.mu.Unlock()
	names := b.replaceTools(old, defs, (*Broker).runServerTool)
	srv.mu.Lock()
	srv.names = names
	srv.loaded = true
	srv.mu.Unlock()
}

// replaceTools swaps one source's tools (a server's, the cloud's): defs
// are registered with run, names in old but not in defs are removed, and
// the MCP layer is told. A name that another source already registered
// (e.g. a local tool) is kept as it was. It returns the names now held.
func (b *Broker) replaceTools(old []string, defs []toolbox.Tool, run func(*Broker, context.Context, toolbox.Tool, map[string]any) Result) []string {
	mine := map[string]bool{}
	for _, n := range old {
		mine[n] = true
	}
	b.toolsMu.Lock()
	keep := map[string]bool{}
	var names []string
	var added []Tool
	for _, d := range defs {
		if _, exists := b.tools[d.Name]; exists && !mine[d.Name] {
			continue
		}
		if _, exists := b.tools[d.Name]; !exists {
			b.order = append(b.order, d.Name)
		}
		keep[d.Name] = true
		names = append(names, d.Name)
		b.tools[d.Name] = toolEntry{def: d, run: run}
		added = append(added, Tool{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema})
	}
	var removed []string
	for _, n := range old {
		if !keep[n] {
			delete(b.tools, n)
			removed = append(removed, n)
		}
	}
	if len(removed) > 0 {
		order := b.order[:0]
		for _, n := range b.order {
			if _, ok := b.tools[n]; ok {
				order = append(order, n)
			}
		}
		b.order = order
	}
	listeners := append([]func([]Tool, []string){}, b.toolListeners...)
	b.toolsMu.Unlock()
	for _, l := range listeners {
		l(added, removed)
	}
	return names
}

// OnToolsChanged registers a listener for tools added or removed at run
// time (servers loaded, list_changed).
func (b *Broker) OnToolsChanged(f func(added []Tool, removed []string)) {
	b.toolsMu.Lock()
	b.toolListeners = append(b.toolListeners, f)
	b.toolsMu.Unlock()
}

func (b *Broker) hasTool(name string) bool {
	b.toolsMu.RLock()
	defer b.toolsMu.RUnlock()
	_, ok := b.tools[name]
	return ok
}

type toolEntry struct {
	def toolbox.Tool
	run func(b *Broker, ctx context.Context, def toolbox.Tool, args map[string]any) Result
}

func (b *Broker) add(t toolbox.Tool, run func(*Broker, context.Context, toolbox.Tool, map[string]any) Result) {
	b.tools[t.Name] = toolEntry{def: t, run: run}
	b.order = append(b.order, t.Name)
}

// Tools lists every tool, in a stable order, ending with
// pml:continue_workflow.
func (b *Broker) Tools() []Tool {
	b.toolsMu.RLock()
	defer b.toolsMu.RUnlock()
	out := make([]Tool, 0, len(b.order)+1)
	for _, n := range b.order {
		d := b.tools[n].def
		out = append(out, Tool{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema})
	}
	return append(out, continueTool)
}

var continueTool = Tool{
	Name: ContinueTool,
	Description: "Answer a pending approval (a result with approval_required) for clients that cannot resend the original call: " +
		"approved runs the stored call, always also adds the tool to permissions.allow in .pml.json.",
	InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "workflow_id": {"type": "string", "description": "The workflow_id of the approval_required result."},
    "approved": {"type": "boolean", "description": "true runs the call, false aborts it."},
    "always": {"type": "boolean", "description": "Also allow this tool from now on (saved in .pml.json)."}
  },
  "required": ["workflow_id", "approved"]
}`),
}
