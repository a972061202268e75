//go:build linux

package e2e

//lint:file-ignore SA1019 roots are deprecated from MCP 2026-07-28 (SEP-2577), but a server of that revision may still ask for them in its input requests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAModernServersRootsListReachesTheClientMapped: a server pml speaks
// MCP 2026-07-28 to asks for the roots (the probe's modern_roots: a
// roots/list under client_roots beside a question under
// favourite_colour, in one input_required result). A client on
// 2026-07-28 that declared roots, over `pml serve --server probe` and
// `pml stdio`, gets the roots/list among the server's input requests,
// under the server's key; its answer reaches the server mapped into the
// container: the roots at or under the workspace as container paths
// (the workspace is mounted at its own path), the name stripped of its
// escapes, and nothing of what lies outside: /etc, a ".." out of the
// workspace (plain and percent-encoded), another host's path, a sibling
// sharing the workspace's prefix. A symlink in the workspace that points
// out is mapped lexically (the container sees the link, in the mount).
// An answer with no root in the workspace gives the server the
// container's roots; 10,000 roots give it 64. A client that did not
// declare roots is not asked: pml answers from the container's roots.
func TestAModernServersRootsListReachesTheClientMapped(t *testing.T) {
	config := probeConfig(t, `, "protocol": "2026-07-28"`)
	newClient := func(caps *mcp.ClientCapabilities) *mcp.Client {
		return mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, &mcp.ClientOptions{
			// The test answers the input requests itself, to see them.
			MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
			Capabilities:   caps,
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return nil, nil
			},
		})
	}
	withRoots := newClient(&mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{}})
	noRoots := newClient(&mcp.ClientCapabilities{})
	colour := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"colour": "teal"}}

	// round asks the tool and answers: the server's answer lines, and
	// whether the client was asked for its roots.
	round := func(t *testing.T, cs *mcp.ClientSession, tool string, roots []*mcp.Root) (lines []string, asked bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.NeedsInput() {
			t.Fatalf("want input_required, got %q", text(res))
		}
		if q, ok := res.InputRequests["favourite_colour"].(*mcp.ElicitParams); !ok || q.Message != "server probe asks: Which colour?" {
			t.Fatalf("want the server's question under its key, attributed: %#v", res.InputRequests)
		}
		resps := mcp.InputResponseMap{"favourite_colour": colour}
		_, asked = res.InputRequests["client_roots"].(*mcp.ListRootsParams)
		if asked {
			resps["client_roots"] = &mcp.ListRootsResult{Roots: roots}
		} else if len(res.InputRequests) != 1 {
			t.Fatalf("input requests %#v", res.InputRequests)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}, RequestState: res.RequestState, InputResponses: resps})
		if err != nil {
			t.Fatal(err)
		}
		if res.NeedsInput() || res.IsError || strings.HasPrefix(text(res), "error") {
			t.Fatalf("want the server's complete result: %#v %q", res.InputRequests, text(res))
		}
		return strings.Split(text(res), "\n"), asked
	}

	check := func(t *testing.T, ws *workspace, connect func(*mcp.Client) *mcp.ClientSession, toolOf func(*mcp.ClientSession) string) {
		dir, err := filepath.EvalSymlinks(ws.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "sub", "deeper"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/etc", filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
		container := "file://" + dir + "|" + filepath.Base(dir)
		hostile := []*mcp.Root{
			{URI: "file:///etc", Name: "etc"},
			{URI: "file://" + dir + "/sub", Name: "\x1b[31msub\x1b[0m\u202e"},
			{URI: "file://" + dir + "/../etc", Name: "dotdot"},
			{URI: "file://" + dir + "/%2e%2e/%2E%2E/etc", Name: "encoded"},
			{URI: "file://otherhost" + dir, Name: "otherhost"},
			{URI: "file://" + dir + "-sibling", Name: "sibling"},
			{URI: "https://example.com" + dir, Name: "https"},
			{URI: "file://" + dir + "/sub/../sub/deeper/", Name: "deeper"},
			{URI: "file://" + dir + "/link", Name: "link"},
			{URI: "sub", Name: "relative"},
		}

		cs := connect(withRoots)
		tool := toolOf(cs)
		lines, asked := round(t, cs, tool, hostile)
		if !asked {
			t.Fatal("the client that declared roots was not asked for them")
		}
		want := []string{"file://" + dir + "/sub|[31msub[0m", "file://" + dir + "/sub/deeper|deeper", "file://" + dir + "/link|link"}
		if fmt.Sprint(lines) != fmt.Sprint(want) {
			t.Errorf("the server got the roots\n%q\nwant\n%q", lines, want)
		}
		for _, l := range lines {
			if strings.Contains(l, "/etc") || strings.Contains(l, "otherhost") || strings.Contains(l, "sibling") || strings.Contains(l, "\x1b") {
				t.Errorf("a path outside the workspace, or an escape, reached the server: %q", l)
			}
		}

		// Nothing in the workspace: the container's roots.
		lines, _ = round(t, cs, tool, []*mcp.Root{{URI: "file:///etc"}, {URI: "file:///home"}})
		if len(lines) != 1 || lines[0] != container {
			t.Errorf("want the container's roots %q, the server got %q", container, lines)
		}
		// 10,000 roots: 64.
		many := make([]*mcp.Root, 10000)
		for i := range many {
			many[i] = &mcp.Root{URI: fmt.Sprintf("file://%s/sub/d%d", dir, i)}
		}
		if lines, _ = round(t, cs, tool, many); len(lines) != 64 {
			t.Errorf("10,000 roots: the server got %d", len(lines))
		}

		// A client without roots: not asked; the container's roots.
		other := connect(noRoots)
		lines, asked = round(t, other, toolOf(other), nil)
		if asked || len(lines) != 1 || lines[0] != container {
			t.Errorf("a client without roots: asked %v, the server got %q (want %q)", asked, lines, container)
		}
	}

	t.Run("serve --server", func(t *testing.T) {
		ws := newWorkspace(t, config)
		url, token := startServeArgs(t, ws, "--server", "probe")
		check(t, ws, func(c *mcp.Client) *mcp.ClientSession {
			cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
				Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
			}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			return cs
		}, func(*mcp.ClientSession) string { return "modern_roots" })

		// Answers that are no roots list, raw: a string, a number for
		// the list, an error object, a root whose uri is no string, an
		// elicitation's answer. None reaches the server; the question
		// still waits for an answer that is one.
		dir, _ := filepath.EvalSymlinks(ws.Dir)
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"e2e-raw","version":"1"},` +
			`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}},"roots":{}}}`
		hdr := modernHeaders("tools/call", "modern_roots")
		_, _, body := rawModern(t, url, token, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"modern_roots","arguments":{},`+meta+`}}`, hdr)
		res, rpcErr := answerOf(body)
		state, _ := res["requestState"].(string)
		if reqs, _ := res["inputRequests"].(map[string]any); reqs["client_roots"] == nil || state == "" {
			t.Fatalf("want the roots/list as an input request: %v %s", rpcErr, body)
		}
		retry := func(answer string) (map[string]any, map[string]any, string) {
			q, _ := json.Marshal(state)
			_, _, body := rawModern(t, url, token, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"modern_roots","arguments":{},"requestState":`+string(q)+
				`,"inputResponses":{"favourite_colour":{"action":"accept","content":{"colour":"teal"}},"client_roots":`+answer+`},`+meta+`}}`, hdr)
			res, rpcErr := answerOf(body)
			return res, rpcErr, body
		}
		for _, bad := range []string{`"x"`, `{"roots":5}`, `{"code":-32603,"message":"the client failed"}`, `{"roots":[{"uri":5}]}`, `{"action":"accept"}`, `[]`, `null`} {
			res, rpcErr, body := retry(bad)
			if rpcErr == nil && (res["isError"] != true || !strings.Contains(body, "still waiting")) {
				t.Errorf("the answer %s reached the server: %s", bad, body)
			}
		}
		res, rpcErr, body = retry(`{"roots":[{"uri":"file:///etc"},{"uri":"file://` + dir + `/sub","name":"sub"}]}`)
		if rpcErr != nil || res["isError"] == true || !strings.Contains(body, "file://"+dir+"/sub|sub") || strings.Contains(body, "/etc") {
			t.Errorf("after the bad answers, a good one: %v %s", rpcErr, body)
		}
	})

	t.Run("stdio", func(t *testing.T) {
		ws := newWorkspace(t, config)
		var stderrs []*syncBuffer
		check(t, ws, func(c *mcp.Client) *mcp.ClientSession {
			cs, _, stderr := startRecorded(t, ws, c, "2026-07-28")
			stderrs = append(stderrs, stderr)
			return cs
		}, func(cs *mcp.ClientSession) string {
			return wireNames(t, cs, "probe:modern_roots")["probe:modern_roots"]
		})
		if t.Failed() {
			for _, s := range stderrs {
				t.Logf("stderr:\n%s", s.String())
			}
		}
	})
}
