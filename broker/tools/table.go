package tools

import (
	"context"
	"sync"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/toolbox"
)

// Table holds every callable tool by name, in listing order, and
// tells listeners when sources (servers, the cloud) add or remove theirs.
// Safe for concurrent use; the zero value is empty.
type Table struct {
	mu        sync.RWMutex
	entries   map[string]Entry
	order     []string
	listeners []func(added []Tool, removed []string)
}

// Entry is a tool and the executor that runs it.
type Entry struct {
	Def  toolbox.Tool
	Exec Executor
}

// Executor is a tool source: it runs one allowed call of def, its
// arguments decoded (the execute layer's last step). Each source is its
// own type holding only what it needs (package sandbox's ToolboxExec, ShellExec, …).
//
// c is the call that runs it, for what travels with a call (its request:
// the relay, the progress token, the fast path's forward; a capability's
// declaration): def and args are what runs, which for an approval's
// answer are the approved call's, not c's own.
type Executor interface {
	Run(ctx context.Context, c *call.Call, def toolbox.Tool, args map[string]any) call.Result
}

// ExecutorFunc lets a function be an Executor, as http.HandlerFunc does
// for handlers (a test's stand-in tool).
type ExecutorFunc func(ctx context.Context, c *call.Call, def toolbox.Tool, args map[string]any) call.Result

func (f ExecutorFunc) Run(ctx context.Context, c *call.Call, def toolbox.Tool, args map[string]any) call.Result {
	return f(ctx, c, def, args)
}

// Add registers a built-in tool (while the broker is built).
func (t *Table) Add(def toolbox.Tool, exec Executor) {
	mustExec(exec, def.Name)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.entries == nil {
		t.entries = map[string]Entry{}
	}
	t.entries[def.Name] = Entry{Def: def, Exec: exec}
	t.order = append(t.order, def.Name)
}

// Get returns the entry of the tool named name.
func (t *Table) Get(name string) (Entry, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e, ok := t.entries[name]
	return e, ok
}

// Has reports whether the table holds a tool named name.
func (t *Table) Has(name string) bool {
	_, ok := t.Get(name)
	return ok
}

// List returns the tools in order.
func (t *Table) List() []Tool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]Tool, 0, len(t.order)+1)
	for _, n := range t.order {
		d := t.entries[n].Def
		out = append(out, toolOf(d))
	}
	return out
}

func toolOf(d toolbox.Tool) Tool {
	return Tool{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema, Title: d.Title, Annotations: d.Annotations,
		OutputSchema: d.OutputSchema, Meta: d.Meta, Icons: d.Icons}
}

// Notify calls the listeners with no change of tools: something else
// that decides the listing (the permissions) changed.
func (t *Table) Notify() {
	t.mu.RLock()
	listeners := append([]func([]Tool, []string){}, t.listeners...)
	t.mu.RUnlock()
	for _, l := range listeners {
		l(nil, nil)
	}
}

// OnChange registers f to be told of every change (Replace, Notify).
func (t *Table) OnChange(f func(added []Tool, removed []string)) {
	t.mu.Lock()
	t.listeners = append(t.listeners, f)
	t.mu.Unlock()
}

// Replace swaps one source's tools (a server's, the cloud's): defs are
// registered with exec, names in old but not in defs are removed, and the
// listeners are told. A name that another source already registered (e.g.
// a local tool) is kept as it was. It returns the names now held.
func (t *Table) Replace(old []string, defs []toolbox.Tool, exec Executor) []string {
	if len(defs) > 0 {
		mustExec(exec, defs[0].Name)
	}
	mine := map[string]bool{}
	for _, n := range old {
		mine[n] = true
	}
	t.mu.Lock()
	if t.entries == nil {
		t.entries = map[string]Entry{}
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
		t.entries[d.Name] = Entry{Def: d, Exec: exec}
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
func (t *Table) removeLocked(old []string, keep map[string]bool) []string {
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

// mustExec stops a tool from being listed with no executor: the broker is
// built in an order (New), and a source that lists tools before their
// executor exists would fail only at the tool's first call, as a panic
// inside the request path. Here it fails where the order is wrong.
func mustExec(exec Executor, name string) {
	if exec == nil {
		panic("tools: " + name + " registered with no executor (the broker's parts are built out of order)")
	}
}
