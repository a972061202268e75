package call

import "context"

// requestKey carries the calling request (its workflows and elicitation)
// to the tools a call runs, so that a code run's inner calls ask the same
// client. It rides in the context because an executor gets the context,
// the tool and its arguments, not the Call; a step that has the Call
// reads Call.Req instead.
type requestKey struct{}

// WithRequest is ctx carrying req for the tools the call runs.
func WithRequest(ctx context.Context, req Request) context.Context {
	return context.WithValue(ctx, requestKey{}, req)
}

// RequestOf is the request ctx carries (WithRequest), or none.
func RequestOf(ctx context.Context) Request {
	r, _ := ctx.Value(requestKey{}).(Request)
	return r
}
