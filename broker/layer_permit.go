package broker

import (
	"go.opentelemetry.io/otel/attribute"

	"context"
	"fmt"
	"sync"

	"github.com/pml-dev/pml/internal/audit"
)

// permitLayer reads the permissions for the tool (permissions.go: deny >
// ask > allow) and notes them on the Call; a deny pattern ends the call
// here. Whether ask (or no pattern) needs a person is approveLayer's.
type permitLayer struct {
	next Handler
	// decide reads the current permissions; source names where they come
	// from, for the refusal.
	decide func(tool string) (Decision, string)
	source func() string
}

func (l permitLayer) Call(ctx context.Context, c *Call) Result {
	_, span := spanStep(ctx, "permit")
	c.Decision, c.Pattern = l.decide(c.Tool)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("pml.decision", string(c.Decision)), attribute.String("pml.pattern", c.Pattern))
	}
	span.End()
	if c.Decision == Deny {
		src := l.source()
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Denied, Pattern: c.Pattern, ArgKeys: audit.Keys(c.Args),
			Reason: fmt.Sprintf("deny pattern %q from %s", c.Pattern, src)})
		return errorResult(fmt.Errorf("%w: %s matches the deny pattern %q in %s; remove it from permissions.deny there to use this tool", ErrDenied, c.Tool, c.Pattern, src))
	}
	return l.next.Call(ctx, c)
}

// decide reads the current permissions (they change when a user answers
// "always").
func (b *Broker) decide(tool string) (Decision, string) { return b.perms.decide(tool) }

// livePermissions are the permissions in force: read by every call,
// changed by an "always" answer and replaced when .pml.json is reloaded
// (reload.go). Safe for concurrent use.
type livePermissions struct {
	mu sync.RWMutex
	p  Permissions
	// denyFrom names where permissions.deny came from: the file's path or
	// the environment variable (PML_PERMISSIONS_DENY).
	denyFrom string
	// gen counts the changes made by pml itself ("always"): a reload read
	// before one of them is stale and is not applied (the write's own
	// file event brings the next reload).
	gen uint64
}

// generation is the count of pml's own changes so far.
func (l *livePermissions) generation() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.gen
}

// replace puts p in force unless pml changed the permissions itself since
// gen (then p was read before that change and is stale). It returns the
// permissions replaced and whether p was applied.
func (l *livePermissions) replace(p Permissions, denyFrom string, gen uint64) (Permissions, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen != gen {
		return l.p, false
	}
	old := l.p
	l.p, l.denyFrom = p, denyFrom
	return old, true
}

// source names where the deny list came from.
func (l *livePermissions) source() string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.denyFrom
}

func (l *livePermissions) decide(tool string) (Decision, string) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.p.Decide(tool)
}

// inAsk reports whether tool is named exactly in ask.
func (l *livePermissions) inAsk(tool string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return contains(l.p.Ask, tool)
}

// change runs f with the permissions held for writing: f saves a change
// and then applies it, so no call decides on a half-made change and two
// answers are saved one after the other.
func (l *livePermissions) change(f func(p *Permissions) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	return f(&l.p)
}

// permSource names where the deny patterns come from (a refusal says
// it): the .pml.json path or the environment variable.
func (b *Broker) permSource() string {
	if s := b.perms.source(); s != "" {
		return s
	}
	return "pml's defaults (no .pml.json)"
}
