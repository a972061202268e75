package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/container"
)

// auditLayer wraps the whole request path: whatever way a call leaves it,
// it leaves exactly one audit entry. The steps below note the outcome on
// the Call (Call.note); a call that returns with nothing noted is
// recorded as failed, with the kind of its error as the reason, so no
// exit goes unaudited.
type auditLayer struct {
	next Handler
	log  zerolog.Logger
	sink *audit.Log
	// noter, when set, adds the runtime's note to every entry (see
	// container.AuditNoter).
	noter container.AuditNoter
}

// auditLayerNoted gives the audit layer of path the runtime's note.
func auditLayerNoted(path Handler, n container.AuditNoter) Handler {
	if l, ok := path.(auditLayer); ok {
		l.noter = n
		return l
	}
	return path
}

func (l auditLayer) Call(ctx context.Context, c *Call) Result {
	defer func() {
		if v := recover(); v != nil {
			// A panic below: the call still leaves its entry; the
			// request's recover boundary (recover.go) answers it.
			l.record(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: "pml panicked (a bug in pml; the stack is in pml's log)", ArgKeys: audit.Keys(c.Args)}, c.began)
			panic(v)
		}
	}()
	res := l.next.Call(ctx, c)
	e, ok := c.Noted()
	if !ok {
		e = audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: unnotedReason(res), ArgKeys: audit.Keys(c.Args)}
	}
	l.record(e, c.began)
	return res
}

// unnotedReason names an outcome no step noted: the kind of its error
// (kindName, the words the logs use), "error" for an error of no kind.
func unnotedReason(res Result) string {
	if res.IsError {
		return kindName(res.err)
	}
	return "not recorded by any step"
}

// record appends to the audit log; a failing audit log is logged, never
// fatal to the call.
func (l auditLayer) record(e audit.Entry, began time.Time) {
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
	if err := l.sink.Record(e); err != nil {
		l.log.Error().Err(err).Msg("writing the audit log")
	}
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
	l.record(audit.Entry{Tool: tool, Decision: audit.Failed, Reason: reason, ArgKeys: keys}, time.Now())
}

// refusedReason says why the go-sdk refused a call of a listed tool
// before pml's steps: the JSON-RPC code only (its message may quote the
// arguments).
func refusedReason(err error) string {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return fmt.Sprintf("refused by the MCP layer before any step ran (JSON-RPC error %d)", we.Code)
	}
	return "refused by the MCP layer before any step ran"
}
