package call

import "encoding/json"

// ForwardCall is a call the stdio fast path (mcpserve's fastpath.go) asks
// a pooled server's executor to forward as bytes; a layer that decides it
// must not be (an answer to an approval) turns it off.
type ForwardCall struct {
	args     json.RawMessage
	token    json.RawMessage // the client's progress token, or nil
	meta     json.RawMessage // the client's _meta for the server (Request.Meta's bytes), or nil
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
func (f *ForwardCall) Answered() bool { return f != nil && f.answered }

// On says the call is still to be forwarded as bytes.
func (f *ForwardCall) On() bool { return f != nil && f.args != nil }

// Off makes the call take the usual path (its arguments decoded).
func (f *ForwardCall) Off() {
	if f != nil {
		f.args = nil
	}
}

// SetMeta sets the client's _meta for the server, as bytes: a JSON
// object without the progress token (mcpserve/meta.go), or nil.
func (f *ForwardCall) SetMeta(meta json.RawMessage) { f.meta = meta }

// Meta is the client's _meta for the server, as SetMeta set it.
func (f *ForwardCall) Meta() json.RawMessage { return f.meta }

// Parts are what the executor forwards: the arguments as they came, the
// client's progress token, and where progress and the answer go.
func (f *ForwardCall) Parts() (args, token json.RawMessage, progress func(params []byte), answer func(result json.RawMessage) bool) {
	return f.args, f.token, f.progress, f.answer
}

// SetAnswered records whether the server's result went to the client as
// it came.
func (f *ForwardCall) SetAnswered(sent bool) { f.answered = sent }
