package main

//lint:file-ignore SA1019 roots are deprecated from MCP 2026-07-28 (SEP-2577), but a server of that revision may still ask for them in its input requests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// probeState is the requestState the probe hands out with its question:
// a retry must bring it back unchanged.
const probeState = "probe-state-colour-1"

// probeRootsState is modern_roots' requestState.
const probeRootsState = "probe-state-roots-1"

// colourQuestion is the probe's one question, under its key.
func colourQuestion() mcp.InputRequestMap {
	return mcp.InputRequestMap{"favourite_colour": &mcp.ElicitParams{
		Message: "Which colour?",
		RequestedSchema: map[string]any{"type": "object",
			"properties": map[string]any{"colour": map[string]any{"type": "string"}}, "required": []any{"colour"}},
	}}
}

// addModernPrompt adds the colour question as a prompt (PROBE_FEATURES):
// prompts/get answers input_required, then the prompt "paint it …".
func addModernPrompt(s *mcp.Server) {
	s.AddPrompt(&mcp.Prompt{Name: "colour", Description: "Ask the person for a colour with an input_required result (MCP 2026-07-28)."},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			a, ok := req.Params.InputResponses["favourite_colour"].(*mcp.ElicitResult)
			if !ok {
				return &mcp.GetPromptResult{InputRequests: colourQuestion(), RequestState: probeState}, nil
			}
			if req.Params.RequestState != probeState || a.Action != "accept" {
				return nil, fmt.Errorf("the retry brought requestState %q and %s", req.Params.RequestState, a.Action)
			}
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
				Content: &mcp.TextContent{Text: fmt.Sprintf("paint it %v", a.Content["colour"])}}}}, nil
		})
}

// addModernTools adds what a server on MCP 2026-07-28 asks with: a tool
// that answers input_required (SEP-2322), its question under a key of
// its own ("favourite_colour") with a requestState of its own; the retry
// with the answer and that state gets "colour: …". A client on
// 2025-11-25 gets the question as an elicitation request instead (the
// go-sdk asks it and calls the tool again).
func addModernTools(s *mcp.Server) {
	// needs_sampling refuses the call with the error MCP 2026-07-28
	// defines for a request the client did not declare a capability for
	// (-32021, MissingRequiredClientCapability), naming sampling in its
	// data, as a server that would ask the client to sample does.
	mcp.AddTool(s, &mcp.Tool{Name: "needs_sampling", Description: "Refuse with -32021 (MissingRequiredClientCapability): the client declared no sampling."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
				Message: "the probe needs the client's sampling capability",
				Data:    json.RawMessage(`{"requiredCapabilities":{"sampling":{}}}`)}
		})
	// modern_roots asks for the client's roots with an input_required
	// result (its roots/list under the key client_roots, with a question
	// under favourite_colour beside it, as a server asks several things
	// at once) and answers what it was given: "URI|name" a line.
	mcp.AddTool(s, &mcp.Tool{Name: "modern_roots", Description: "Ask for the roots (roots/list) and a colour with an input_required result (MCP 2026-07-28); answer the roots given, URI|name a line."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			r, ok := req.Params.InputResponses["client_roots"].(*mcp.ListRootsResult)
			if !ok {
				q := colourQuestion()
				q["client_roots"] = &mcp.ListRootsParams{}
				return &mcp.CallToolResult{InputRequests: q, RequestState: probeRootsState}, nil, nil
			}
			if req.Params.RequestState != probeRootsState {
				return text(fmt.Sprintf("error: the retry brought requestState %q, not the probe's", req.Params.RequestState)), nil, nil
			}
			var lines []string
			for _, root := range r.Roots {
				lines = append(lines, root.URI+"|"+root.Name)
			}
			return text(strings.Join(lines, "\n")), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "colour", Description: "Ask the person for a colour with an input_required result (MCP 2026-07-28); answer what they chose."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			a, ok := req.Params.InputResponses["favourite_colour"].(*mcp.ElicitResult)
			if !ok {
				return &mcp.CallToolResult{InputRequests: colourQuestion(), RequestState: probeState}, nil, nil
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
