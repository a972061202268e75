package main

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server that answers tools it does not list (the conformance suite's
// reference server answers test_trigger_tool_change so), and reads names
// loosely (PROBE_UNLISTED set): a tools/call of a name it does not list
// is answered "ran unlisted NAME" and recorded, or, when the name is a
// listed tool's in another case, runs that tool (a server that would run
// a tool pml holds under a name pml does not know). The listed tool
// unlisted_calls answers the names that reached it so, one quoted a
// line ("none": none did).

var (
	unlistedMu    sync.Mutex
	unlistedCalls []string
)

func addUnlisted(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "unlisted_calls", Description: "The names of the unlisted tools called so far."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			unlistedMu.Lock()
			defer unlistedMu.Unlock()
			if len(unlistedCalls) == 0 {
				return text("none"), nil, nil
			}
			return text(strings.Join(unlistedCalls, "\n")), nil, nil
		})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			cr, ok := req.(*mcp.CallToolRequest)
			if method != "tools/call" || err == nil || !ok || cr.Params == nil || !strings.Contains(err.Error(), "unknown tool") {
				return res, err
			}
			name := cr.Params.Name
			unlistedMu.Lock()
			unlistedCalls = append(unlistedCalls, strconv.Quote(name))
			unlistedMu.Unlock()
			if lower := strings.ToLower(name); lower != name {
				cr.Params.Name = lower
				if res, err := next(ctx, method, req); err == nil {
					return res, nil
				}
				cr.Params.Name = name
			}
			return text("ran unlisted " + name), nil
		}
	})
}
