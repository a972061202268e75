package upstream

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/telemetry"
)

// newClient is pml's client for the server, with its middlewares: the
// trace context on what pml sends, the guard on what it receives.
func (s *Server) newClient(opts *mcp.ClientOptions) *mcp.Client {
	client := mcp.NewClient(&mcp.Implementation{Name: "pml", Version: "broker"}, opts)
	client.AddSendingMiddleware(telemetry.ClientMiddleware(s.o.Name))
	client.AddReceivingMiddleware(guardRequests(s.o.Name, s.o.Logger))
	return client
}

// guardRequests is the receiving middleware of pml's client session
// with a server: what the server sends pml runs in a goroutine of the
// go-sdk's, where a panic would end pml. A request without the params it
// needs is refused before it reaches a handler (the go-sdk's own elicit
// handler reads the params of an elicitation/create it lets through
// without any), and any panic answers the server's request with an
// internal error, logged with its stack, while pml goes on.
func guardRequests(server string, log zerolog.Logger) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
			defer func() {
				if v := recover(); v != nil {
					log.Error().Str("server", server).Str("method", method).Str("panic", fmt.Sprint(v)).Str("stack", string(debug.Stack())).
						Msg("pml panicked while answering the MCP server's " + method + " (a bug in pml: please report it with this stack); the server's request got an internal error and pml goes on")
					res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error in pml while answering " + method + "; pml kept running"}
				}
			}()
			if method == "elicitation/create" || method == "sampling/createMessage" {
				if p := req.GetParams(); p == nil || telemetry.IsNilParams(p) {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + " needs params"}
				}
			}
			return next(ctx, method, req)
		}
	}
}
