package mcpserve

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/panics"
	"github.com/pml-dev/pml/internal/wirename"
)

// The recover boundary. The go-sdk runs every request's handler in a
// goroutine of its own (not net/http's, which would recover), so a panic
// anywhere in pml's answer to one request would end the process: every
// session of `pml serve`, every container's owner. As net/http does per
// connection, pml recovers per request instead: the request is answered
// with a JSON-RPC internal error that names it, the stack goes to pml's
// log once, the panic is counted (pml.panics), and pml serves on.

// recoverRequests is the outermost receiving middleware (but for
// modernResults, which only gives a result its encoding): every MCP
// request pml serves (stdio and Streamable HTTP) runs inside it, tool
// calls on the go-sdk's path included. log gives the log of the moment
// (the workspace's broker may change during a session).
func recoverRequests(log func() zerolog.Logger) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
			defer func() {
				if v := recover(); v != nil {
					res, err = nil, panics.Recovered(log(), v, method, requestTool(req))
				}
			}()
			return next(ctx, method, req)
		}
	}
}

// requestTool is the tool a tools/call names (pml's name when the wire
// name decodes), else "".
func requestTool(req mcp.Request) string {
	cr, ok := req.(*mcp.CallToolRequest)
	if !ok || cr == nil || cr.Params == nil {
		return ""
	}
	if n, ok := wirename.Decode(cr.Params.Name); ok {
		return n
	}
	return cr.Params.Name
}

// recoverHTTP is the recover boundary of pml serve's HTTP handler. net/http
// recovers a panic in a handler itself, but only to log it to the
// standard log and drop the connection; here it is pml's log line, with
// its stack, and counted, and the client gets a 500 when nothing was
// written yet. (What the go-sdk runs for the request's messages, in
// goroutines of its own, is recoverRequests'.)
func recoverHTTP(log zerolog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v) // net/http's own way to drop a connection
			}
			panics.Log(log, v, "", "serving an HTTP "+r.Method+" request")
			http.Error(w, "pml: internal error while serving the request (a bug in pml; the stack is in pml's log); pml kept running", http.StatusInternalServerError)
		}()
		h.ServeHTTP(w, r)
	})
}
