package broker

import (
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
	c.Decision, c.Pattern = l.decide(c.Tool)
	if c.Decision == Deny {
		c.note(audit.Entry{Tool: c.Tool, Decision: audit.Denied, Pattern: c.Pattern, ArgKeys: audit.Keys(c.Args)})
		return errorResult(fmt.Errorf("%w: %s matches the deny pattern %q in %s; remove it from permissions.deny to use this tool", ErrDenied, c.Tool, c.Pattern, l.source()))
	}
	return l.next.Call(ctx, c)
}

// decide reads the current permissions (they change when a user answers
// "always").
func (b *Broker) decide(tool string) (Decision, string) { return b.perms.decide(tool) }

// livePermissions are the permissions in force: read by every call,
// changed by an "always" answer. Safe for concurrent use.
type livePermissions struct {
	mu sync.RWMutex
	p  Permissions
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
	return f(&l.p)
}

// permSource names where the permissions come from.
func (b *Broker) permSource() string {
	if b.cfg.Exists {
		return b.cfg.Path
	}
	return "pml's defaults (no .pml.json)"
}
