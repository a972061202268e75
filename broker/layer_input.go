package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/jsonrpc"
)

// inputLayer decodes a call's arguments and sends pml's own answers to
// approvals (pml:continue_workflow, a continue_workflow argument, an
// answer from the client's elicitation UI) to answers; every other call
// goes on to next. The continuation argument is pml's, not the tool's: it
// is taken out before the tool sees its arguments. An answer names its
// workflow, which names its tool, so answers need nothing resolved (a
// registry tool may not be loaded yet).
type inputLayer struct {
	next    call.Handler
	answers call.Handler
}

func (l inputLayer) Call(ctx context.Context, c *call.Call) call.Result {
	if fwd := c.Req.Forward; fwd.On() {
		// The fast path: the arguments go to the server as they came;
		// the layers need only their names (the audit's arg_keys).
		if args, ok := topLevel(c.Req.Args); ok {
			if _, cont := args["continue_workflow"]; !cont {
				c.Args, c.RawArgs = args, true
				return l.next.Call(ctx, c)
			}
		}
		// An answer to an approval, or arguments pml must look at: the
		// whole call takes the usual path.
		fwd.Off()
	}
	c.Args = map[string]any{}
	if raw := c.Req.Args; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &c.Args); err != nil {
			c.Args = nil
			c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: "arguments are not a JSON object"})
			return errorResult(fmt.Errorf("%w: the arguments of %s must be a JSON object: %v", call.ErrInvalidInput, c.Tool, err))
		}
	}
	if c.Tool == call.ContinueTool {
		return l.answer(ctx, c, c.Args)
	}
	if c.Req.Elicited != nil {
		return l.answers.Call(ctx, c)
	}
	if raw, ok := c.Args["continue_workflow"]; ok {
		delete(c.Args, "continue_workflow")
		return l.answer(ctx, c, raw)
	}
	return l.next.Call(ctx, c)
}

// answer parses a relayed answer and hands it to answers.
func (l inputLayer) answer(ctx context.Context, c *call.Call, raw any) call.Result {
	cont, err := parseContinuation(raw)
	if err != nil {
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: "continue_workflow is malformed", ArgKeys: audit.Keys(c.Args)})
		return errorResult(err)
	}
	c.Cont = &cont
	return l.answers.Call(ctx, c)
}

func parseContinuation(raw any) (workflow.Continuation, error) {
	js, _ := json.Marshal(raw)
	var c workflow.Continuation
	if err := json.Unmarshal(js, &c); err != nil || c.WorkflowID == "" {
		return c, fmt.Errorf("%w: continue_workflow must be {\"workflow_id\": \"…\", \"approved\": true|false, \"always\": true|false}", call.ErrInvalidInput)
	}
	return c, nil
}

// topLevel returns the top-level members of the JSON object raw, their
// values kept raw (json.RawMessage); ok is false when raw is not an
// object, or a name needs unescaping (then the usual decoding answers).
func topLevel(raw json.RawMessage) (map[string]any, bool) {
	args := map[string]any{}
	if len(raw) == 0 || string(raw) == "null" {
		return args, true
	}
	escaped := false
	ok := jsonrpc.Each(raw, func(k, v []byte) bool {
		if bytes.IndexByte(k, '\\') >= 0 {
			escaped = true
			return false
		}
		args[string(k)] = json.RawMessage(v)
		return true
	})
	return args, ok && !escaped
}
