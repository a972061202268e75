package broker

import (
	"context"
	"encoding/json"

	"github.com/pml-dev/pml/internal/upstream"
)

// ForwardCall is a call the stdio fast path (mcpserve's fastpath.go) asks
// a pooled server's executor to forward as bytes; its args is set to nil
// when a layer decides it must not be (an answer to an approval).
type ForwardCall struct {
	args     json.RawMessage
	token    json.RawMessage // the client's progress token, or nil
	progress func(params []byte)
	// answer sends the server's result to the client the moment it
	// arrives (upstream.Server.Forward calls it), before the layers
	// unwind; the audit entry is written right after. It is false when
	// the result cannot go as it is (too large to pass on whole).
	// answered says it went (set by the executor).
	answer   func(result json.RawMessage) bool
	answered bool
}

// NewForwardCall is a forwarded call of args (never nil), with the
// client's progress token (nil: none) and where its progress and its
// answer go.
func NewForwardCall(args, token json.RawMessage, progress func(params []byte), answer func(result json.RawMessage) bool) *ForwardCall {
	return &ForwardCall{args: args, token: token, progress: progress, answer: answer}
}

// Answered says the server's result went to the client as it came (the
// caller then sends nothing more).
func (f *ForwardCall) Answered() bool { return f.answered }

func (f *ForwardCall) on() bool { return f != nil && f.args != nil }

// forwardOf returns the fast-path call in ctx, if any.
func forwardOf(ctx context.Context) *ForwardCall {
	ci, _ := ctx.Value(callInfoKey{}).(callInfo)
	return ci.fwd
}

// CallInfo is what the MCP surface hands a call beside its Request:
// where a server's progress, log messages and requests go during the
// call, the client's progress token, and the fast path's forward (nil:
// the call is not forwarded as bytes).
type CallInfo struct {
	Relay         upstream.Relay
	ProgressToken any
	Forward       *ForwardCall
}

// WithCallInfo carries ci in ctx to the call's executor.
func WithCallInfo(ctx context.Context, ci CallInfo) context.Context {
	return withCallInfo(ctx, callInfo{relay: ci.Relay, progressToken: ci.ProgressToken, fwd: ci.Forward})
}
