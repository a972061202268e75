package main

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// probeState is the requestState the probe hands out with its question:
// a retry must bring it back unchanged.
const probeState = "probe-state-colour-1"

// addModernTools adds what a server on MCP 2026-07-28 asks with: a tool
// that answers input_required (SEP-2322), its question under a key of
// its own ("favourite_colour") with a requestState of its own; the retry
// with the answer and that state gets "colour: …". A client on
// 2025-11-25 gets the question as an elicitation request instead (the
// go-sdk asks it and calls the tool again).
func addModernTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "colour", Description: "Ask the person for a colour with an input_required result (MCP 2026-07-28); answer what they chose."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			a, ok := req.Params.InputResponses["favourite_colour"].(*mcp.ElicitResult)
			if !ok {
				return &mcp.CallToolResult{
					InputRequests: mcp.InputRequestMap{"favourite_colour": &mcp.ElicitParams{
						Message: "Which colour?",
						RequestedSchema: map[string]any{"type": "object",
							"properties": map[string]any{"colour": map[string]any{"type": "string"}}, "required": []any{"colour"}},
					}},
					RequestState: probeState,
				}, nil, nil
			}
			if req.Params.RequestState != probeState {
				return text(fmt.Sprintf("error: the retry brought requestState %q, not the probe's", req.Params.RequestState)), nil, nil
			}
			if a.Action != "accept" {
				return text("colour: none (" + a.Action + ")"), nil, nil
			}
			return text(fmt.Sprintf("colour: %v", a.Content["colour"])), nil, nil
		})
}
