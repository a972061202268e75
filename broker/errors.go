package broker

import "errors"

// Error kinds of the broker, tested with errors.Is. The MCP layer maps each
// to a tool result a person understands.
var (
	// ErrDenied: a deny pattern matched.
	ErrDenied = errors.New("denied by permissions")
	// ErrNeedsApproval: an ask pattern (or no pattern) matched.
	ErrNeedsApproval = errors.New("needs approval")
	// ErrNotFound: no such tool.
	ErrNotFound = errors.New("no such tool")
	// ErrUnavailable: the container runtime (or an image) is not available.
	ErrUnavailable = errors.New("unavailable")
	// ErrInvalidInput: bad arguments, including paths outside the workspace.
	ErrInvalidInput = errors.New("invalid input")
)
