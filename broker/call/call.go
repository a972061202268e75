package call

import (
	"context"
	"encoding/json"
	"time"

	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/audit"
)

// Handler answers one tool call. Each step of the request path is a
// Handler that does its one job and hands the call to the next (see the
// package doc for the order); the last one executes the tool. A Handler
// never returns a Go error: every failure is a Result with IsError.
type Handler interface {
	Call(ctx context.Context, c *Call) Result
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, c *Call) Result

// Call calls f.
func (f HandlerFunc) Call(ctx context.Context, c *Call) Result { return f(ctx, c) }

// Call is one tool call on its way down the request path. The layers
// fill it in as they go (the decoded arguments, the permission) and note
// the outcome that the audit layer writes, once, when the call is done.
// A Call belongs to one goroutine.
type Call struct {
	// Req is the request as the MCP layer handed it over.
	Req Request
	// Tool is the tool's name; Args its arguments once decoded (input
	// layer), without pml's own continue_workflow.
	Tool string
	Args map[string]any
	// RawArgs: Args hold their values raw (json.RawMessage), as the fast
	// path keeps them; decodeArgs decodes them.
	RawArgs bool
	// Decision and Pattern are the permission that matched (permit layer).
	Decision Decision
	Pattern  string

	// Cont is a relayed answer to an approval (input layer).
	Cont *workflow.Continuation
	// FromRegistry: the tool is fetched from a registry (resolve layer).
	FromRegistry bool
	// UpFront is the checked declaration of the capability this call
	// runs, on its way to the run (the declared step puts it here, an
	// approval's answer puts the approved one; the run's start reads it:
	// UpFrontFor).
	UpFront *Declared
	Began   time.Time
	// entry is the audit entry noted (Note), when noted is set: held in
	// the Call, not behind a pointer, so noting costs no allocation.
	entry audit.Entry
	noted bool
}

// UpFrontFor is the declaration the call carries for the run of tool, or
// nil (none, or one for another tool: a run started by an inner call of a
// run never takes its parent's).
func (c *Call) UpFrontFor(tool string) *Declared {
	if c == nil || c.UpFront == nil || c.UpFront.Capability != tool {
		return nil
	}
	return c.UpFront
}

// Note sets the audit entry of the call. A later Note replaces an earlier
// one: the last step that decided (an approval answered in the dialog,
// then the run) names the outcome.
func (c *Call) Note(e audit.Entry) {
	c.entry, c.noted = e, true
}

// Noted returns the audit entry noted so far, if any.
func (c *Call) Noted() (audit.Entry, bool) {
	if !c.noted {
		return audit.Entry{}, false
	}
	return c.entry, true
}

// NewCall starts a call for req.
func NewCall(req Request) *Call {
	return &Call{Req: req, Tool: req.Tool, Began: time.Now()}
}

// DecodeArgs decodes arguments kept raw by the fast path, for a step that
// shows them to a person (an approval): from here the call is no longer
// one that passes them on unread.
func (c *Call) DecodeArgs() {
	if !c.RawArgs {
		return
	}
	c.RawArgs = false
	args := map[string]any{}
	if err := json.Unmarshal(c.Req.Args, &args); err == nil {
		c.Args = args
	}
}
