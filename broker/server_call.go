package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/upstream"
)

// callInfo travels in a call's context from the MCP layer to a server
// tool: where progress, log messages and server requests go.
type callInfo struct {
	relay         upstream.Relay
	progressToken any
}

type callInfoKey struct{}

func withCallInfo(ctx context.Context, ci callInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, ci)
}

// runServerTool forwards a call to the server's pooled container.
func (b *Broker) runServerTool(ctx context.Context, def toolbox.Tool, args map[string]any) Result {
	srv := b.serverOf(def.Name)
	if srv == nil {
		return errorResult(fmt.Errorf("%w %q", ErrNotFound, def.Name))
	}
	if err := b.prepareServer(srv); err != nil {
		return errorResult(err)
	}
	ci, _ := ctx.Value(callInfoKey{}).(callInfo)
	if t := b.policy.Timeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeDuration(t))
		defer cancel()
	}
	raw, _ := json.Marshal(args)
	_, tool, _ := strings.Cut(def.Name, ":")
	var res *mcp.CallToolResult
	var err error
	if srv.cfg.Lifetime == "per_call" {
		res, err = b.callPerCall(ctx, srv, tool, raw, ci) // percall.go
	} else {
		res, err = srv.up.Call(ctx, tool, raw, ci.progressToken, ci.relay)
	}
	if err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return errorResult(fmt.Errorf("%s timed out after %s (the server was told to cancel it; raise sandbox.timeout in .pml.json if the work needs longer)", def.Name, timeDuration(b.policy.Timeout)))
		case errors.Is(err, context.Canceled):
			return errorResult(fmt.Errorf("%s was cancelled", def.Name))
		case errors.Is(err, container.ErrUnavailable), errors.Is(err, container.ErrImageMissing):
			return errorResult(fmt.Errorf("%w: %w", ErrUnavailable, err))
		}
		return errorResult(err)
	}
	return Result{Text: joinText(res), Structured: res.StructuredContent, IsError: res.IsError, upstream: res}
}

func joinText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}
