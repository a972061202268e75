package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/pml-dev/pml/broker/call"
	sbx "github.com/pml-dev/pml/broker/sandbox"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/telemetry"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/toolbox"
)

// executeLayer is the end of the request path: the call is allowed (by a
// permission or a person's answer) and runs.
type executeLayer struct {
	// run installs, finds and runs a tool (Broker.runTool).
	run func(ctx context.Context, c *call.Call, name string, args map[string]any, decision, pattern, workflowID string) call.Result
	// serve runs a request of another kind (Broker.serveFeature).
	serve func(ctx context.Context, c *call.Call) call.Result
}

func (l executeLayer) Call(ctx context.Context, c *call.Call) call.Result {
	if c.Req.Kind != call.KindTool && l.serve != nil {
		return l.serve(ctx, c)
	}
	return l.run(ctx, c, c.Tool, c.Args, audit.Allowed, c.Pattern, "")
}

// runTool installs what a server tool needs, finds the tool's executor
// (lookup) and runs it. decision is what let the call through (allowed,
// approved, always), noted for the audit with the pattern and workflow.
func (b *Broker) runTool(ctx context.Context, c *call.Call, name string, args map[string]any, decision, pattern, workflowID string) call.Result {
	if srv := b.srv.ServerOf(name); srv != nil && !b.srv.Deps.Installed(srv.Cfg) {
		ictx, span := spanStep(ctx, "install")
		err := b.srv.Install(ictx, srv)
		span.End()
		if err != nil {
			c.Note(audit.Entry{Tool: name, Decision: audit.Failed, Pattern: pattern, WorkflowID: workflowID, Reason: "install failed", ArgKeys: audit.Keys(args)})
			if errors.Is(err, container.ErrImageMissing) || errors.Is(err, container.ErrUnavailable) {
				// The install could not start for want of its image (not
				// pulled: offline) or the engine: the call is
				// unavailable (pml call exits 5), as when the server
				// itself cannot start (lookup), not the tool's error.
				err = fmt.Errorf("%w: %w", call.ErrUnavailable, err)
			}
			return errorResult(err)
		}
	}
	entry := tl.Entry{Def: toolbox.Tool{Name: name}, Exec: b.cloud.Exec()}
	unlisted := false
	if !b.cloud.IsCloudTool(name) || b.srv.HasTool(name) {
		var err error
		// A name its server does not list runs only when the policy
		// names it exactly (tools/unlisted.go).
		if entry, unlisted, err = b.srv.LookupCall(ctx, name); err != nil {
			c.Note(audit.Entry{Tool: name, Decision: audit.Failed, Pattern: pattern, WorkflowID: workflowID, Reason: "no such tool", ArgKeys: audit.Keys(args)})
			return errorResult(err)
		}
	}
	if entry.Held != nil {
		// The pin layer puts a held tool to the person and pins what they
		// accept before it runs again; a held entry reaching this step
		// was registered after that layer looked (a list read from the
		// tools cache here), and runs nothing.
		c.Note(audit.Entry{Tool: name, Decision: audit.Denied, Pattern: pattern, WorkflowID: workflowID, Reason: "tool definition " + string(entry.Held.State) + ": held", ArgKeys: audit.Keys(args)})
		return errorResult(fmt.Errorf("%w: pml holds %s: %s; nothing ran. Review the change (pml lock shows its diff) and accept it with `pml lock --accept %s`, then call again",
			call.ErrNotTrusted, termsafe.Quote(name, 200), entry.Held.Summary(), name))
	}
	// else: a cloud tool not (yet) in the cloud's list is forwarded anyway,
	// and the cloud answers whether it knows it.
	_, pooled := entry.Exec.(sbx.PooledExec)
	if c.RawArgs && !pooled {
		// Kept raw for a pooled server that is no longer one (a reload):
		// this executor reads them.
		c.DecodeArgs()
		args = c.Args
	}
	testPanic(name, args)
	var res call.Result
	if pooled {
		// A pooled server's call has pml's client span to the server
		// (internal/upstream), and pml.container.acquire when it waited
		// for the container: an execute span around them would say
		// nothing more, at the cost of a span on every warm call.
		res = entry.Exec.Run(ctx, c, entry.Def, args)
	} else {
		ectx, span := spanStep(ctx, "execute")
		res = entry.Exec.Run(ectx, c, entry.Def, args)
		if res.IsError {
			telemetry.Fail(span, "tool_error", "the tool's result is an error")
		}
		span.End()
	}
	status := "ok"
	if res.IsError {
		status = "error"
	}
	if res.Blocked {
		decision = audit.PathBlocked
	}
	e := audit.Entry{Tool: entry.Def.Name, Decision: decision, Pattern: pattern, WorkflowID: workflowID, ExitStatus: status, ArgKeys: audit.Keys(args)}
	if _, inContainer := b.ask.AccessOf(entry.Def.Name); inContainer {
		// Asked of the engine only after a call that ran: one stopped by
		// its deadline (an engine that does not answer) must not wait for
		// it past that deadline; the start-up's question learns it.
		e.Limits = b.sb.KnownLimitsNote()
		if !res.IsError {
			e.Limits = b.sb.LimitsNote(ctx)
		}
	}
	if res.Degraded != "" {
		e.Reason = res.Degraded
	}
	if unlisted {
		// Its server does not list it: no definition was shown, checked
		// or pinned; the exact entry (the pattern) let it through.
		e.Unlisted = true
		if e.Reason == "" {
			e.Reason = "not listed by its server: forwarded because an exact entry of permissions.allow names it; unpinned"
		}
	}
	if r := res.Refusal; r != nil {
		// Refused by the executor before anything ran (cloud_exec.go):
		// the call's one entry says denied, and by which pattern.
		e = audit.Entry{Tool: entry.Def.Name, Decision: audit.Denied, Pattern: r.Pattern, WorkflowID: workflowID, Reason: r.Reason, ArgKeys: audit.Keys(args)}
	}
	c.Note(e)
	if d := res.UpFront; d != nil {
		// pml:execute's code declares tools that ask: nothing ran yet, and
		// the run waits for the person's one answer (approve/upfront.go).
		return b.ask.UpFrontApproval(ctx, c, entry.Def.Name, args, pattern, d)
	}
	return res
}
