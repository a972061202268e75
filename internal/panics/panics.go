// Package panics is pml's recover boundary below the MCP surface: a
// goroutine pml starts while it answers a request (a server's load, a
// code run's events, the roots check), or one inner call of a code run,
// recovers a panic here, logs it with its stack once, counts it
// (pml.panics) and goes on without what panicked. The boundaries of the
// MCP surface itself (per request, per HTTP request) are
// broker/mcpserve's recover.go, which answers with what Recovered returns.
package panics

import (
	"fmt"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/telemetry"
)

// Recovered logs and counts the panic v, raised while pml answered
// method (for tool, when a tool call), and returns the request's answer:
// a JSON-RPC internal error that says what failed and that pml goes on.
func Recovered(log zerolog.Logger, v any, method, tool string) *jsonrpc.Error {
	what := method
	if tool != "" {
		what = method + " of " + tool
	}
	log.Error().Str("method", method).Str("tool", tool).Str("panic", fmt.Sprint(v)).Str("stack", string(debug.Stack())).
		Msg("pml panicked while answering " + what + " (a bug in pml: please report it with this stack); the request got an internal error and pml goes on serving")
	telemetry.CountPanic(method, tool)
	return &jsonrpc.Error{
		Code: jsonrpc.CodeInternalError,
		Message: fmt.Sprintf("internal error in pml while answering %s: %v. pml kept running and serves the next request; "+
			"the stack is in pml's log (a bug in pml: please report it)", what, v),
	}
}

// Guarded runs fn, a goroutine pml starts while it answers method (a
// server's load for tools/list, the roots check of initialized), where no
// recover boundary is above: a panic in it is logged with its stack and
// counted, and pml goes on without what fn was doing.
func Guarded(log zerolog.Logger, method, what string, fn func()) {
	defer func() {
		if v := recover(); v != nil {
			Log(log, v, method, what)
		}
	}()
	fn()
}

// Log logs (with its stack) and counts the panic v, recovered while pml
// was doing what for method.
func Log(log zerolog.Logger, v any, method, what string) {
	log.Error().Str("method", method).Str("panic", fmt.Sprint(v)).Str("stack", string(debug.Stack())).
		Msg("pml panicked while " + what + " (a bug in pml: please report it with this stack); pml goes on without it")
	telemetry.CountPanic(method, "")
}
