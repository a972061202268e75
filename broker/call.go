package broker

import "github.com/pml-dev/pml/broker/call"

// A call's shapes live in package call; these names keep the broker's
// facade (cmd/pml, tests) as it was.
type (
	Request     = call.Request
	Elicited    = call.Elicited
	Result      = call.Result
	Call        = call.Call
	Handler     = call.Handler
	HandlerFunc = call.HandlerFunc
	Decision    = call.Decision
)

const (
	ContinueTool = call.ContinueTool
	Allow        = call.Allow
	Ask          = call.Ask
	Deny         = call.Deny
)

// Error kinds of the broker, tested with errors.Is (package call says
// how they relate to errdefs).
var (
	ErrDenied       = call.ErrDenied
	ErrNotFound     = call.ErrNotFound
	ErrUnavailable  = call.ErrUnavailable
	ErrInvalidInput = call.ErrInvalidInput
)
