package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestCallCarriesKeyClientAndBYOK(t *testing.T) {
	var got http.Header
	var body map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"found 3"}]}}`))
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL, APIKey: "pml-key", HTTP: srv.Client()}
	res, err := c.CallTool(context.Background(), "tavily:search", map[string]any{"query": "go"}, map[string]string{"TAVILY_API_KEY": "tv-secret"})
	if err != nil {
		t.Fatal(err)
	}
	if tc := res.Content[0].(*mcp.TextContent); tc.Text != "found 3" {
		t.Errorf("result %q", tc.Text)
	}
	if got.Get("x-api-key") != "pml-key" || got.Get("X-PML-Client") != "package" || got.Get("X-PML-BYOK-TAVILY_API_KEY") != "tv-secret" {
		t.Errorf("headers: %v", got)
	}
	if body["method"] != "tools/call" || body["params"].(map[string]any)["name"] != "tavily:search" {
		t.Errorf("body: %v", body)
	}
}

func TestErrorsAreClear(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    error
		text    string
	}{
		{"401", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(401) }, ErrUnauthorized, "invalid PML_API_KEY"},
		{"500", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }, ErrUnavailable, "HTTP 500"},
		{"garbage", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>")) }, ErrProtocol, "not JSON-RPC"},
		{"slow", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
		}, ErrUnavailable, "did not answer within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			c := &Client{URL: srv.URL, APIKey: "secret-key-value", HTTP: srv.Client(), Timeout: 300 * time.Millisecond}
			_, err := c.CallTool(context.Background(), "json:parse", nil, nil)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("err = %v, want %v containing %q", err, tc.want, tc.text)
			}
			if err != nil && strings.Contains(err.Error(), "secret-key-value") {
				t.Error("the API key is in the error text")
			}
		})
	}
}

func TestUnreachableAndLocalMode(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := &Client{URL: url, APIKey: "k"}
	if _, err := c.ListTools(context.Background()); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "cannot be reached") {
		t.Errorf("unreachable: %v", err)
	}
	local := &Client{URL: url}
	if _, err := local.CallTool(context.Background(), "tavily:search", nil, nil); !errors.Is(err, ErrNoAPIKey) {
		t.Errorf("local mode: %v", err)
	}
}

func TestListToolsFollowsCursorsAndReadsEnvRequired(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     int64          `json:"id"`
			Params map[string]any `json:"params"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &req)
		if req.Params["cursor"] == nil {
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"tavily:search","inputSchema":{"type":"object"},"_meta":{"pml/env_required":["TAVILY_API_KEY","bad name"]}}],"nextCursor":"2"}}`))
			return
		}
		// The second page comes as an event stream.
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[{\"name\":\"json:parse\",\"inputSchema\":{\"type\":\"object\"}}]}}\n\n"))
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL, APIKey: "k", HTTP: srv.Client()}
	tools, err := c.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 || tools[1].Name != "json:parse" {
		t.Fatalf("tools: %v", tools)
	}
	if env := EnvRequired(tools[0]); len(env) != 1 || env[0] != "TAVILY_API_KEY" {
		t.Errorf("env_required: %v", env)
	}
}

func TestExecuteLocallyIsRecognised(t *testing.T) {
	structured := &mcp.CallToolResult{StructuredContent: map[string]any{"status": "execute_locally", "code": "return 1"}}
	text := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"status":"execute_locally","code":"x"}`}}}
	normal := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"status":"success"}`}}}
	if _, ok := ExecuteLocally(structured); !ok {
		t.Error("structured execute_locally missed")
	}
	if m, ok := ExecuteLocally(text); !ok || m["code"] != "x" {
		t.Error("text execute_locally missed")
	}
	if _, ok := ExecuteLocally(normal); ok {
		t.Error("a normal result was taken for execute_locally")
	}
}

// sentNothing fails the test if a request is sent at all.
type sentNothing struct{ t *testing.T }

func (s sentNothing) RoundTrip(r *http.Request) (*http.Response, error) {
	s.t.Errorf("a request carrying the API key was sent to %s", r.URL)
	return nil, errors.New("not sent")
}

// A cloud.url that is not https (nor http to loopback) gets nothing: not
// the API key, not a BYOK key; the error names the endpoint and the fix.
func TestKeysAreNeverSentToAPlainHTTPCloud(t *testing.T) {
	c := &Client{URL: "http://pml-cloud.invalid", APIKey: "pml-key", HTTP: &http.Client{Transport: sentNothing{t}}}
	_, err := c.CallTool(context.Background(), "tavily:search", nil, map[string]string{"TAVILY_API_KEY": "tv-secret"})
	if err == nil || !strings.Contains(err.Error(), "cloud.url http://pml-cloud.invalid is not https") || !strings.Contains(err.Error(), "https://") {
		t.Fatalf("CallTool: %v", err)
	}
	if _, err := c.ListTools(context.Background()); err == nil || !strings.Contains(err.Error(), "is not https") {
		t.Fatalf("ListTools: %v", err)
	}
	if errors.Is(err, ErrUnavailable) {
		t.Error("a refusal reads as an unreachable cloud")
	}
}

// http to loopback is allowed: a cloud on this machine (tests, a local
// gateway) is not on any network.
func TestLoopbackHTTPCloudGetsTheKey(t *testing.T) {
	var key string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key = r.Header.Get("x-api-key")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`))
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL, APIKey: "pml-key", HTTP: srv.Client()}
	if _, err := c.ListTools(context.Background()); err != nil || key != "pml-key" {
		t.Fatalf("ListTools on loopback http: %v (key sent: %v)", err, key == "pml-key")
	}
}
