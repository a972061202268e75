package broker

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/toolbox"
)

// registerServerTools makes a server's tools callable as server:tool and
// tells the MCP layer.
func (s *serverSet) registerServerTools(srv *server, tools []*mcp.Tool) {
	var defs []toolbox.Tool
	for _, t := range tools {
		if !s.listable(srv.cfg.Name, t) {
			continue
		}
		schema, _ := json.Marshal(t.InputSchema)
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		// The server's title and annotations pass through unchanged.
		defs = append(defs, toolbox.Tool{Name: srv.cfg.Name + ":" + t.Name, Description: desc, InputSchema: schema, Title: t.Title, Annotations: t.Annotations})
	}
	srv.mu.Lock()
	old := srv.names
	srv.mu.Unlock()
	var exec executor = pooledExec{sb: s.sb, srv: srv}
	if srv.cfg.Lifetime == "per_call" {
		exec = perCallExec{sb: s.sb, deps: s.deps, srv: srv}
	}
	names := s.replaceTools(old, defs, exec)
	srv.mu.Lock()
	srv.names = names
	srv.loaded = true
	srv.mu.Unlock()
}

// listable reports whether a tool a server (or the cloud) listed may be
// listed by pml: a name with a control character, a bidi control or
// invalid UTF-8 is dropped, with a log line naming the source and the
// name quoted. Such a name would reach the client's screens (the tool
// list, approvals, pml tools) and the audit as the server wrote it, and no
// honest tool needs one.
func (s *serverSet) listable(source string, t *mcp.Tool) bool {
	if t == nil {
		return false
	}
	if termsafe.Has(t.Name) {
		s.log.Warn().Str("server", termsafe.Quote(source, 0)).Str("tool", termsafe.Quote(t.Name, 0)).
			Msg("a tool name with control or bidi characters is not listed (the server must rename it)")
		return false
	}
	return true
}

// toolTable holds every callable tool by name, in listing order, and
// tells listeners when sources (servers, the cloud) add or remove theirs.
// Safe for concurrent use; the zero value is empty.
type toolTable struct {
	mu        sync.RWMutex
	entries   map[string]toolEntry
	order     []string
	listeners []func(added []Tool, removed []string)
}

// toolEntry is a tool and the executor that runs it.
type toolEntry struct {
	def  toolbox.Tool
	exec executor
}

// executor is a tool source: it runs one allowed call of def, its
// arguments decoded (the execute layer's last step). Each source is its
// own type holding only what it needs (toolboxExec, shellExec, …).
type executor interface {
	run(ctx context.Context, def toolbox.Tool, args map[string]any) Result
}

// executorFunc lets a function be an executor, as http.HandlerFunc does
// for handlers (a test's stand-in tool).
type executorFunc func(ctx context.Context, def toolbox.Tool, args map[string]any) Result

func (f executorFunc) run(ctx context.Context, def toolbox.Tool, args map[string]any) Result {
	return f(ctx, def, args)
}

// add registers a built-in tool (while the broker is built).
func (t *toolTable) add(def toolbox.Tool, exec executor) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.entries == nil {
		t.entries = map[string]toolEntry{}
	}
	t.entries[def.Name] = toolEntry{def: def, exec: exec}
	t.order = append(t.order, def.Name)
}

func (t *toolTable) get(name string) (toolEntry, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e, ok := t.entries[name]
	return e, ok
}

func (t *toolTable) has(name string) bool {
	_, ok := t.get(name)
	return ok
}

// list returns the tools in order.
func (t *toolTable) list() []Tool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]Tool, 0, len(t.order)+1)
	for _, n := range t.order {
		d := t.entries[n].def
		out = append(out, toolOf(d))
	}
	return out
}

func toolOf(d toolbox.Tool) Tool {
	return Tool{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema, Title: d.Title, Annotations: d.Annotations}
}

// notify calls the listeners with no change of tools: something else
// that decides the listing (the permissions) changed.
func (t *toolTable) notify() {
	t.mu.RLock()
	listeners := append([]func([]Tool, []string){}, t.listeners...)
	t.mu.RUnlock()
	for _, l := range listeners {
		l(nil, nil)
	}
}

func (t *toolTable) onChange(f func(added []Tool, removed []string)) {
	t.mu.Lock()
	t.listeners = append(t.listeners, f)
	t.mu.Unlock()
}

// replace swaps one source's tools (a server's, the cloud's): defs are
// registered with exec, names in old but not in defs are removed, and the
// listeners are told. A name that another source already registered (e.g.
// a local tool) is kept as it was. It returns the names now held.
func (t *toolTable) replace(old []string, defs []toolbox.Tool, exec executor) []string {
	mine := map[string]bool{}
	for _, n := range old {
		mine[n] = true
	}
	t.mu.Lock()
	if t.entries == nil {
		t.entries = map[string]toolEntry{}
	}
	keep := map[string]bool{}
	var names []string
	var added []Tool
	for _, d := range defs {
		_, exists := t.entries[d.Name]
		if exists && !mine[d.Name] {
			continue
		}
		if !exists {
			t.order = append(t.order, d.Name)
		}
		keep[d.Name] = true
		names = append(names, d.Name)
		t.entries[d.Name] = toolEntry{def: d, exec: exec}
		added = append(added, toolOf(d))
	}
	removed := t.removeLocked(old, keep)
	listeners := append([]func([]Tool, []string){}, t.listeners...)
	t.mu.Unlock()
	for _, l := range listeners {
		l(added, removed)
	}
	return names
}

// removeLocked drops the names of old not in keep; t.mu is held.
func (t *toolTable) removeLocked(old []string, keep map[string]bool) []string {
	var removed []string
	for _, n := range old {
		if !keep[n] {
			delete(t.entries, n)
			removed = append(removed, n)
		}
	}
	if len(removed) > 0 {
		order := t.order[:0]
		for _, n := range t.order {
			if _, ok := t.entries[n]; ok {
				order = append(order, n)
			}
		}
		t.order = order
	}
	return removed
}

// replaceTools swaps one source's tools in the table (toolTable.replace).
func (s *serverSet) replaceTools(old []string, defs []toolbox.Tool, exec executor) []string {
	return s.tools.replace(old, defs, exec)
}

// OnToolsChanged registers a listener for tools added or removed at run
// time (servers loaded, list_changed).
func (s *serverSet) OnToolsChanged(f func(added []Tool, removed []string)) { s.tools.onChange(f) }

func (s *serverSet) hasTool(name string) bool { return s.tools.has(name) }

// Tools lists every tool, in a stable order, ending with
// pml:continue_workflow.
func (s *serverSet) Tools() []Tool { return append(s.tools.list(), continueTool) }

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
	Title: "Continue workflow",
	// It runs the stored call, which may write.
	Annotations: toolbox.Hints("Continue workflow", false, true, false),
}
