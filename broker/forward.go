package broker

import (
	"encoding/json"

	"github.com/pml-dev/pml/broker/call"
)

// ForwardCall is the fast path's forwarded call (package call), named
// here for the MCP surface.
type ForwardCall = call.ForwardCall

// NewForwardCall is call.NewForwardCall.
func NewForwardCall(args, token json.RawMessage, progress func(params []byte), answer func(result json.RawMessage) bool) *ForwardCall {
	return call.NewForwardCall(args, token, progress, answer)
}
