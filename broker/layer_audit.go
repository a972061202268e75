package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/errdefs"
)

// auditLayer wraps the whole request path: whatever way a call leaves it,
// it leaves exactly one audit entry. The steps below note the outcome on
// the Call (Call.note); a call that returns with nothing noted is
// recorded as failed, with the kind of its error as the reason, so no
// exit goes unaudited.
//
// The log is complete or the call does not run: before the call goes
// down the path, the log must take its entry (audit.Log.Ready: it opens,
// and room for this entry is reserved past its end on top of the room
// held for every other call in flight), or the call is refused, nothing
// run. The entry itself is written after, with the outcome, into that
// room (audit.Ticket.Record): one line per call, as pml audit shows it.
// This holds for the fast path too, whose answer goes to the client
// before the entry is written: the room was taken before it forwarded.
// Should the write still fail (the file replaced, another pml on the
// workspace using the room up), the client is told with the result where
// it can be. No setting turns any of this off.
type auditLayer struct {
	next call.Handler
	log  zerolog.Logger
	sink *audit.Log
	// noter, when set, adds the runtime's note to every entry (see
	// container.AuditNoter).
	noter container.AuditNoter
}

// auditLayerNoted gives the audit layer of path the runtime's note.
func auditLayerNoted(path call.Handler, n container.AuditNoter) call.Handler {
	if l, ok := path.(auditLayer); ok {
		l.noter = n
		return l
	}
	return path
}

func (l auditLayer) Call(ctx context.Context, c *call.Call) call.Result {
	t, err := l.sink.Ready()
	if err != nil {
		l.log.Error().Err(err).Str("tool", c.Tool).Msg("refused the call: its audit entry cannot be written")
		return call.ResultFor(auditRefusal(c.Tool, err))
	}
	// Every way out below writes the entry, which gives the room back;
	// this is for a way out that one day does not.
	defer t.Release()
	defer func() {
		if v := recover(); v != nil {
			// A panic below: the call still leaves its entry; the
			// request's recover boundary (mcpserve/recover.go) answers it.
			_ = l.record(t, audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: "pml panicked (a bug in pml; the stack is in pml's log)", ArgKeys: audit.Keys(c.Args)}, c.Began)
			panic(v)
		}
	}()
	res := l.next.Call(ctx, c)
	e, ok := c.Noted()
	if !ok {
		e = audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: unnotedReason(res), ArgKeys: audit.Keys(c.Args)}
	}
	// A call a capability's code made without declaring it (layer_declared.go).
	if run := c.Req.Run; run != nil && !run.Declares(c.Tool) {
		e.NotDeclaredBy = run.Capability
	}
	if err := l.record(t, e, c.Began); err != nil {
		res = withAuditFailure(c.Req.Forward, res, err)
	}
	return res
}

// auditRefusal is the error of a call refused because its audit entry
// cannot be written: what was not run, why, and the fix (err, an
// audit.WriteError, names the log, the cause and what to do).
// It is unavailable for errors.Is, both as ErrUnavailable and as its
// errdefs kind (pml call's exit code 5), and unwraps to the
// *audit.WriteError.
func auditRefusal(tool string, err error) error {
	return &auditRefused{tool: tool, err: err}
}

type auditRefused struct {
	tool string
	err  error
}

func (e *auditRefused) Error() string {
	return fmt.Sprintf("pml did not run %s: it runs no call it cannot record, and %v; then call again (pml doctor checks the audit log)", e.tool, e.err)
}

func (e *auditRefused) Unwrap() error { return e.err }

func (e *auditRefused) Is(target error) bool {
	return target == call.ErrUnavailable || target == errdefs.ErrUnavailable
}

// withAuditFailure tells the client that its call ran but its entry is
// not in the audit log. A result the fast path already sent (mcpserve/fastpath.go)
// cannot take the note: the failure is in pml's log only.
func withAuditFailure(fwd *ForwardCall, res call.Result, err error) call.Result {
	note := "pml: this call ran, but its audit entry could not be written: " + err.Error()
	if fwd.Answered() {
		return res
	}
	if res.Raw != nil && res.Upstream == nil {
		var up mcp.CallToolResult
		if json.Unmarshal(res.Raw, &up) != nil {
			return res
		}
		res.Upstream = &up
	}
	if res.Upstream != nil {
		up := *res.Upstream
		up.Content = append(slices.Clip(up.Content), &mcp.TextContent{Text: note})
		res.Upstream = &up
		return res
	}
	if res.Text != "" {
		note = "\n\n" + note
	}
	res.Text += note
	return res
}

// unnotedReason names an outcome no step noted: the kind of its error
// (kindName, the words the logs use), "error" for an error of no kind.
func unnotedReason(res call.Result) string {
	if res.IsError {
		return call.KindName(res.Cause)
	}
	return "not recorded by any step"
}

// record appends to the audit log, into the room t holds (nil: an entry
// of no call Ready admitted); a failure is logged and returned, for the
// client to hear of it too.
func (l auditLayer) record(t *audit.Ticket, e audit.Entry, began time.Time) error {
	e.DurationMS = time.Since(began).Milliseconds()
	if l.noter != nil {
		if n := l.noter.AuditNote(); n != "" {
			if e.Reason != "" {
				n = e.Reason + "; " + n
			}
			e.Reason = n
		}
	}
	ev := l.log.Info()
	if e.Decision == audit.Denied || e.Decision == audit.PathBlocked || e.Decision == audit.Failed {
		ev = l.log.Warn()
	}
	ev.Str("tool", e.Tool).Str("decision", e.Decision).Str("pattern", e.Pattern).Str("workflow_id", e.WorkflowID).Int64("ms", e.DurationMS).Str("status", e.ExitStatus).Msg("tool call")
	var err error
	if t != nil {
		err = t.Record(e)
	} else {
		err = l.sink.Record(e)
	}
	if err != nil {
		l.log.Error().Err(err).Str("tool", e.Tool).Msg("writing the audit log")
	}
	return err
}

// auditRefused records a tools/call the go-sdk answers with a protocol
// error before any layer runs (a tool pml does not have, arguments a
// listed tool's schema refuses): without it such a call would leave no
// entry. tool is the name as the client sent it, or pml's name when it
// is known (the log caps its length); only the argument names are kept.
func (b *Broker) auditRefused(tool string, args json.RawMessage, reason string) {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(args, &m)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	l := auditLayer{log: b.log, sink: b.audit}
	_ = l.record(nil, audit.Entry{Tool: tool, Decision: audit.Failed, Reason: reason, ArgKeys: keys}, time.Now())
}
