package permit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/telemetry"
)

// PermitLayer reads the permissions for the tool (permissions.go: deny >
// ask > allow) and notes them on the Call; a deny pattern ends the call
// here. Whether ask (or no pattern) needs a person is approveLayer's.
type PermitLayer struct {
	Next  call.Handler
	Rules Rules
}

// Rules are the permissions in force (LivePermissions: they change when a
// user answers "always" and on a reload).
type Rules interface {
	// Decide reads the decision for tool and the pattern that made it.
	Decide(tool string) (call.Decision, string)
	// Source names where the permissions come from, for a refusal.
	Source() string
}

func (l PermitLayer) Call(ctx context.Context, c *call.Call) call.Result {
	c.Decision, c.Pattern = l.Rules.Decide(c.Tool)
	// The decision is an event of the call's span, not a span of its
	// own: it takes no time worth a span, and a span costs every traced
	// call (the telemetry row of make bench).
	if span := call.Traced(ctx); span != nil {
		telemetry.AddEvent(span, "pml.permit", "pml.decision", string(c.Decision), "pml.pattern", c.Pattern)
	}
	if c.Decision == call.Deny {
		src := l.Rules.Source()
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Denied, Pattern: c.Pattern, ArgKeys: audit.Keys(c.Args),
			Reason: fmt.Sprintf("deny pattern %q from %s", c.Pattern, src)})
		return call.ResultFor(fmt.Errorf("%w: %s matches the deny pattern %q in %s; remove it from permissions.deny there to use this tool", call.ErrDenied, c.Tool, c.Pattern, src))
	}
	return l.Next.Call(ctx, c)
}

// LivePermissions are the permissions in force: read by every call,
// changed by an "always" answer and replaced when .pml.json is reloaded
// (reload.go). Safe for concurrent use.
type LivePermissions struct {
	mu sync.RWMutex
	p  Permissions
	// denyFrom names where permissions.deny came from: the file's path or
	// the environment variable (PML_PERMISSIONS_DENY).
	denyFrom string
	// gen counts the changes made by pml itself ("always"): a reload read
	// before one of them is stale and is not applied (the write's own
	// file event brings the next reload).
	gen uint64
	// decided remembers Decide's answers (tool → decision) for p as it is
	// now: every call of a tool reads the same answer, which matching
	// each pattern in each of the tool's forms found on every call.
	// Emptied, with mu held for writing, whenever p changes (Replace,
	// Change), so no answer outlives the permissions it came from; read
	// and filled with mu held for reading. It holds at most maxDecided
	// names (a client may call any name), beyond which Decide decides
	// without remembering.
	decided  sync.Map // string → decided
	nDecided atomic.Int64
}

// decided is one answer of Permissions.Decide.
type decided struct {
	d       call.Decision
	pattern string
}

// maxDecided bounds the names LivePermissions remembers an answer for.
const maxDecided = 4096

// forget empties the remembered answers; the caller holds mu for writing.
func (l *LivePermissions) forget() {
	l.decided.Clear()
	l.nDecided.Store(0)
}

// NewLivePermissions puts p in force; denyFrom names where its deny list
// came from (DenySource).
func NewLivePermissions(p Permissions, denyFrom string) *LivePermissions {
	return &LivePermissions{p: p, denyFrom: denyFrom}
}

// Generation is the count of pml's own changes so far.
func (l *LivePermissions) Generation() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.gen
}

// Replace puts p in force unless pml changed the permissions itself since
// gen (then p was read before that change and is stale). It returns the
// permissions replaced and whether p was applied.
func (l *LivePermissions) Replace(p Permissions, denyFrom string, gen uint64) (Permissions, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen != gen {
		return l.p, false
	}
	old := l.p
	l.p, l.denyFrom = p, denyFrom
	l.forget()
	return old, true
}

// Source names where the deny patterns come from (a refusal says it):
// the .pml.json path or the environment variable.
func (l *LivePermissions) Source() string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.denyFrom != "" {
		return l.denyFrom
	}
	return "pml's defaults (no .pml.json)"
}

// Current returns a copy of the permissions in force.
func (l *LivePermissions) Current() Permissions {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.p
}

func (l *LivePermissions) Decide(tool string) (call.Decision, string) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if v, ok := l.decided.Load(tool); ok {
		a := v.(decided)
		return a.d, a.pattern
	}
	d, pattern := l.p.Decide(tool)
	if l.nDecided.Add(1) <= maxDecided {
		l.decided.Store(tool, decided{d, pattern})
	}
	return d, pattern
}

// DeniesServer is Permissions.DeniesServer of the permissions in force.
func (l *LivePermissions) DeniesServer(ns string) string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.p.DeniesServer(ns)
}

// InAsk reports whether tool is named exactly in ask.
func (l *LivePermissions) InAsk(tool string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return Contains(l.p.Ask, tool)
}

// Change runs f with the permissions held for writing: f saves a Change
// and then applies it, so no call decides on a half-made Change and two
// answers are saved one after the other.
func (l *LivePermissions) Change(f func(p *Permissions) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	// Whatever f does to p (even when it fails part way), the answers
	// remembered were for p before it.
	defer l.forget()
	return f(&l.p)
}

// Unlisted is Permissions.Unlisted of the permissions in force.
func (l *LivePermissions) Unlisted(tool string) (call.Decision, string, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.p.Unlisted(tool)
}
