package main

import (
	"context"
	"encoding/json"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server whose tools change between sessions (issue 56's tests of
// pinned tool definitions): with PROBE_DEFS_FILE set, the tools listed
// in that file (a JSON list of {"name", "description", "inputSchema"}, in
// the workspace the test rewrites) are added at start, each answering
// "ran NAME"; the tool reload_defs reads the file again mid-session,
// replacing those tools (the server then sends tools/list_changed).

type fileDef struct {
	// Prompt: a prompt of that name and description (answering one
	// message "prompt NAME"), not a tool.
	Prompt      bool           `json:"prompt"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
}

func addFileDefs(s *mcp.Server) {
	path := os.Getenv("PROBE_DEFS_FILE")
	if path == "" {
		return
	}
	var had, hadPrompts []string
	load := func() error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var defs []fileDef
		if err := json.Unmarshal(b, &defs); err != nil {
			return err
		}
		s.RemoveTools(had...)
		s.RemovePrompts(hadPrompts...)
		had, hadPrompts = had[:0], hadPrompts[:0]
		for _, d := range defs {
			name := d.Name
			if d.Prompt {
				s.AddPrompt(&mcp.Prompt{Name: name, Description: d.Description}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "prompt " + name}}}}, nil
				})
				hadPrompts = append(hadPrompts, name)
				continue
			}
			schema := d.InputSchema
			if schema == nil {
				schema = map[string]any{"type": "object"}
			}
			s.AddTool(&mcp.Tool{Name: name, Description: d.Description, InputSchema: schema},
				func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return text("ran " + name), nil
				})
			had = append(had, name)
		}
		return nil
	}
	_ = load()
	mcp.AddTool(s, &mcp.Tool{Name: "reload_defs", Description: "Read PROBE_DEFS_FILE again and list its tools as it says now."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			if err := load(); err != nil {
				return text("reload: " + err.Error()), nil, nil
			}
			return text("reloaded"), nil, nil
		})
}
