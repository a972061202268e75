package broker

import (
	"context"
	"fmt"
	"strings"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/audit"
)

// declaredLayer checks a capability's declared tools (its registry
// entry's tools_used and client_tools) against the permissions before
// its run starts (seed 000 story 14.3 AC4-6): one denied and the run is
// refused here, before any container, with the one audit entry of the
// call; those asked go with the call (call.WithUpFront) to the approve
// step, which puts them to the person in the capability's one approval.
// A tool that declares nothing goes on as it came.
type declaredLayer struct {
	next Handler
	// declared is what tool's capability declares, nil for a tool of no
	// capability or one that declares nothing (registrySide.declaredBy).
	declared func(tool string) []string
	// decide and source are the permissions' (permit.LivePermissions).
	decide func(tool string) (Decision, string)
	source func() string
}

func (l declaredLayer) Call(ctx context.Context, c *Call) Result {
	tools := l.declared(c.Tool)
	if len(tools) == 0 {
		return l.next.Call(ctx, c)
	}
	d := &call.Declared{Capability: c.Tool, Tools: tools}
	for _, t := range tools {
		switch dec, pat := l.decide(t); dec {
		case Deny:
			src := l.source()
			c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Denied, Pattern: pat, ArgKeys: audit.Keys(c.Args),
				Reason: fmt.Sprintf("declares %s, which matches the deny pattern %q from %s", t, pat, src)})
			return errorResult(fmt.Errorf("%w: %s was not run: its capability declares it calls %s (tools_used), which matches the deny pattern %q in %s; nothing ran. "+
				"Remove the pattern from permissions.deny there to run it, or use a capability that does not call %s", ErrDenied, c.Tool, t, pat, src, t))
		case Ask:
			d.Asked = append(d.Asked, t)
		}
	}
	return l.next.Call(call.WithUpFront(ctx, d), c)
}

// declaredBy is what the deno capability that provides tool declares
// its code calls (tools_used and client_tools), nil for any other tool.
func (r *registrySide) declaredBy(tool string) []string {
	ns, _, ok := strings.Cut(tool, ":")
	if !ok {
		return nil
	}
	r.mu.Lock()
	e := r.deno[ns]
	r.mu.Unlock()
	if e == nil {
		return nil
	}
	return e.Meta.Declared()
}
