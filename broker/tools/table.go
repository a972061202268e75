package tools

import (
	"context"
	"fmt"
	"sync"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/toolpin"
)

// Table holds every callable tool by name, in listing order, and
// tells listeners when sources (servers, the cloud) add or remove theirs.
// Safe for concurrent use; the zero value is empty.
type Table struct {
	mu        sync.RWMutex
	entries   map[string]Entry
	order     []string
	listeners []func(added []Tool, removed []string)
	// pins decide which definitions are held (pins.go); nil holds none.
	pins     Pinner
	policy   func(server string) string
	onPinErr func(server string, err error)
	// heldPrompts are the prompts whose definition drifted from its pin,
	// by permission name (SERVER:prompt:NAME; HoldPrompts).
	heldPrompts map[string]*toolpin.Drift
}

// Entry is a tool and the executor that runs it.
type Entry struct {
	Def  toolbox.Tool
	Exec Executor
	// Held is a definition that drifted from its pin: Def is what the
	// client is shown meanwhile (heldDef), Real what the server listed,
	// which Accept puts in its place.
	Held *toolpin.Drift
	Real toolbox.Tool
}

// SetPins makes the table hold every listed definition that drifted from
// its pin (a new tool of a pinned server, a changed one). policy says a
// server's tool_changes policy; onErr is told when the pins cannot be
// read (every tool of that server is then held: nothing is taken as
// accepted that pml cannot check).
func (t *Table) SetPins(p Pinner, policy func(server string) string, onErr func(server string, err error)) {
	t.mu.Lock()
	t.pins, t.policy, t.onPinErr = p, policy, onErr
	t.mu.Unlock()
}

// Held is the drift of a held tool (nil: not held).
func (t *Table) Held(name string) *toolpin.Drift {
	e, ok := t.Get(name)
	if !ok {
		return nil
	}
	return e.Held
}

// Accept pins the definition shown for a held tool (digest is the one
// the person was shown) and lists it as the server does. A tool whose
// definition changed again since then stays held (toolpin.Store.Accept
// refuses a digest that is not the definition's).
func (t *Table) Accept(name, digest string) error {
	t.mu.RLock()
	e, ok := t.entries[name]
	pins := t.pins
	t.mu.RUnlock()
	if !ok || e.Held == nil || pins == nil {
		return nil
	}
	if e.Held.Digest != digest {
		return fmt.Errorf("the definition of %s changed again since it was shown; nothing was pinned: call it again to see the change", name)
	}
	if err := pins.Accept(e.Held.Now, digest); err != nil {
		return err
	}
	t.mu.Lock()
	cur, ok := t.entries[name]
	if ok && cur.Held != nil && cur.Held.Digest == digest {
		cur.Def, cur.Held = cur.Real, nil
		t.entries[name] = cur
	}
	listeners := append([]func([]Tool, []string){}, t.listeners...)
	t.mu.Unlock()
	for _, l := range listeners {
		l([]Tool{toolOf(cur.Def)}, nil)
	}
	return nil
}

// holds checks defs against the pins, by server: the drifts, by name.
func (t *Table) holds(defs []toolbox.Tool) (map[string]*toolpin.Drift, func(string) string) {
	t.mu.RLock()
	pins, policy, onErr := t.pins, t.policy, t.onPinErr
	t.mu.RUnlock()
	if pins == nil || len(defs) == 0 {
		return nil, nil
	}
	by := map[string][]toolpin.Def{}
	var order []string
	for _, d := range defs {
		s := toolpin.Server(d.Name)
		if _, ok := by[s]; !ok {
			order = append(order, s)
		}
		by[s] = append(by[s], PinDef(d))
	}
	var held map[string]*toolpin.Drift
	for _, s := range order {
		h, err := pins.Check(toolpin.KindTool, s, by[s])
		if err == nil && policy != nil && policy(s) == PolicyFollow {
			// Pinned as it comes: accepted by the policy the person
			// trusted (only what drifted is written).
			for _, d := range h {
				if err := pins.Accept(d.Now, d.Digest); err != nil && onErr != nil {
					onErr(s, err)
				}
			}
			continue
		}
		if err != nil {
			// The pins cannot be read (a file someone else could
			// write, a damaged one): nothing of the server is taken as
			// accepted, so every tool is held, and accepting one says why
			// it cannot be pinned.
			if onErr != nil {
				onErr(s, err)
			}
			h = map[string]*toolpin.Drift{}
			for _, d := range by[s] {
				h[d.Name] = &toolpin.Drift{State: toolpin.New, Now: d, Digest: d.Digest()}
			}
		}
		for n, d := range h {
			if held == nil {
				held = map[string]*toolpin.Drift{}
			}
			held[n] = d
		}
	}
	return held, policy
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
		OutputSchema: d.OutputSchema, Meta: d.Meta, Icons: d.Icons, Execution: d.Execution}
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
	held, policy := t.holds(defs)
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
		e := Entry{Def: d, Exec: exec}
		if dr := held[d.Name]; dr != nil {
			p := PolicyHold
			if policy != nil {
				p = policy(toolpin.Server(d.Name))
			}
			e = Entry{Def: heldDef(d, dr, p), Exec: exec, Held: dr, Real: d}
		}
		t.entries[d.Name] = e
		added = append(added, toolOf(e.Def))
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
