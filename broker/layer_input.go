package broker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pml-dev/pml/internal/audit"
)

// inputLayer decodes a call's arguments and sends pml's own answers to
// approvals (pml:continue_workflow, a continue_workflow argument, an
// answer from the client's elicitation UI) to answers; every other call
// goes on to next. The continuation argument is pml's, not the tool's: it
// is taken out before the tool sees its arguments. An answer names its
// workflow, which names its tool, so answers need nothing resolved (a
// registry tool may not be loaded yet).
type inputLayer struct {
	next    Handler
	answers Handler
}

func (l inputLayer) Call(ctx context.Context, c *Call) Result {
	c.Args = map[string]any{}
	if raw := c.Req.Args; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &c.Args); err != nil {
			c.Args = nil
			c.note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: "arguments are not a JSON object"})
			return errorResult(fmt.Errorf("%w: the arguments of %s must be a JSON object: %v", ErrInvalidInput, c.Tool, err))
		}
	}
	if c.Tool == ContinueTool {
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
func (l inputLayer) answer(ctx context.Context, c *Call, raw any) Result {
	cont, err := parseContinuation(raw)
	if err != nil {
		c.note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: "continue_workflow is malformed", ArgKeys: audit.Keys(c.Args)})
		return errorResult(err)
	}
	c.cont = &cont
	return l.answers.Call(ctx, c)
}

func parseContinuation(raw any) (Continuation, error) {
	js, _ := json.Marshal(raw)
	var c Continuation
	if err := json.Unmarshal(js, &c); err != nil || c.WorkflowID == "" {
		return c, fmt.Errorf("%w: continue_workflow must be {\"workflow_id\": \"…\", \"approved\": true|false, \"always\": true|false}", ErrInvalidInput)
	}
	return c, nil
}
