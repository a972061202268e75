//go:build linux

package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAModernServersInputRequestReachesTheClient: a server pml speaks MCP
// 2026-07-28 to ("protocol": "2026-07-28") asks with an input_required
// result (the probe's colour tool: its question under the key
// favourite_colour, a requestState of its own). A client on 2026-07-28,
// over pml stdio and pml serve, gets the question under the server's own
// key, attributed to the server, with a requestState of pml's (the
// server's never leaves pml); its retry's answer reaches the server,
// which gets its own state back; a tampered requestState is a JSON-RPC
// error. The same for a prompt's get over pml serve. A client on
// 2025-06-18 gets the same question as an elicitation request.
func TestAModernServersInputRequestReachesTheClient(t *testing.T) {
	config := probeConfig(t, `, "workspace": "none", "protocol": "2026-07-28"`)
	modern := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &mcp.ClientOptions{
		// The test answers the input requests itself, to see them.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, nil
		},
	})
	check := func(t *testing.T, cs *mcp.ClientSession) {
		names := wireNames(t, cs, "probe:colour")
		tool := names["probe:colour"]
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.NeedsInput() {
			t.Fatalf("want input_required, got %q", text(res))
		}
		q, ok := res.InputRequests["favourite_colour"].(*mcp.ElicitParams)
		if !ok || len(res.InputRequests) != 1 {
			t.Fatalf("want the server's question under its own key favourite_colour: %#v", res.InputRequests)
		}
		if q.Message != "server probe asks: Which colour?" {
			t.Errorf("the question is not attributed to the server: %q", q.Message)
		}
		if res.RequestState == "" || strings.Contains(res.RequestState, "probe-state") {
			t.Errorf("the server's requestState reached the client (or none was given): %q", res.RequestState)
		}
		// A tampered requestState: a JSON-RPC error, nothing reaches the
		// server, the question still waits.
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}, RequestState: res.RequestState + "-TAMPERED",
			InputResponses: mcp.InputResponseMap{"favourite_colour": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"colour": "forged"}}}}); err == nil {
			t.Errorf("a tampered requestState was not refused with an error")
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}, RequestState: res.RequestState,
			InputResponses: mcp.InputResponseMap{"favourite_colour": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"colour": "teal"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.NeedsInput() || text(res) != "colour: teal" {
			t.Fatalf("the answer did not reach the server with its own state: %q", text(res))
		}
	}

	t.Run("stdio", func(t *testing.T) {
		ws := newWorkspace(t, config)
		cs, _, stderr := startRecorded(t, ws, modern, "2026-07-28")
		check(t, cs)
		if t.Failed() {
			t.Logf("stderr:\n%s", stderr.String())
		}
	})

	t.Run("serve", func(t *testing.T) {
		ws := newWorkspace(t, config)
		url, token := startServe(t, ws)
		cs, err := modern.Connect(context.Background(), &mcp.StreamableClientTransport{
			Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
		}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		check(t, cs)
	})

	t.Run("a prompt, over pml serve", func(t *testing.T) {
		// The probe's colour prompt asks the same way during prompts/get.
		ws := newWorkspace(t, probeConfig(t, `, "workspace": "none", "protocol": "2026-07-28", "env": {"PROBE_FEATURES": "1"}`))
		url, token := startServe(t, ws)
		cs, err := modern.Connect(context.Background(), &mcp.StreamableClientTransport{
			Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
		}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		var name string
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(p.Name, "colour") {
				name = p.Name
			}
		}
		if name == "" {
			t.Fatal("the probe's colour prompt is not listed")
		}
		res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		q, ok := res.InputRequests["favourite_colour"].(*mcp.ElicitParams)
		if !res.NeedsInput() || !ok || q.Message != "server probe asks: Which colour?" || strings.Contains(res.RequestState, "probe-state") {
			t.Fatalf("want the server's question under its key, attributed, with pml's requestState: %#v %q", res.InputRequests, res.RequestState)
		}
		res, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, RequestState: res.RequestState,
			InputResponses: mcp.InputResponseMap{"favourite_colour": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"colour": "teal"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.NeedsInput() || len(res.Messages) != 1 {
			t.Fatalf("want the prompt after the answer: %#v", res)
		}
		if tc, ok := res.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "paint it teal" {
			t.Fatalf("the answer did not reach the server: %#v", res.Messages[0].Content)
		}
	})

	t.Run("a legacy client", func(t *testing.T) {
		ws := newWorkspace(t, config)
		var asked []string
		s := elicitSession(t, ws, "2025-06-18", func(req *mcp.ElicitRequest) *mcp.ElicitResult {
			asked = append(asked, req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"colour": "ochre"}}
		})
		out, res := s.call(t, "probe:colour", nil)
		if res.IsError || out != "colour: ochre" || len(asked) != 1 || asked[0] != "server probe asks: Which colour?" {
			t.Fatalf("want the server's question asked once as an elicitation and its answer to reach the server: %q, asked %q\nstderr:\n%s", out, asked, s.stderr.String())
		}
	})
}
