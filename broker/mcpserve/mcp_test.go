package mcpserve

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioClient connects an MCP client to ServeStdio over pipes; elicit,
// when set, answers the broker's elicitation requests.
func stdioClient(t *testing.T, f *fixture, elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) *mcp.ClientSession {
	t.Helper()
	return stdioClientOn(t, f.b, elicit)
}

// stdioClientOn is stdioClient serving b.
func stdioClientOn(t *testing.T, b Backend, elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) *mcp.ClientSession {
	t.Helper()
	cin, sout := io.Pipe()
	sin, cout := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeStdio(ctx, b, sin, sout) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{ElicitationHandler: elicit})
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: cin, Writer: cout}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		cancel()
		_ = cout.Close()
		<-done
	})
	return cs
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestMCPListsAndCallsTools(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["filesystem:read_file"], "deny": ["shell:*"]}}`)
	cs := stdioClient(t, f, nil)
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range list.Tools {
		names[tl.Name] = true
	}
	var read string
	for n := range names {
		if strings.HasSuffix(n, "read_file") && !strings.Contains(n, "multiple") {
			read = n
		}
	}
	if read == "" {
		t.Fatalf("no read_file in %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: read, Arguments: map[string]any{"path": "a.txt"}})
	if err != nil || res.IsError || !strings.Contains(text(res), "hello") {
		t.Fatalf("read_file over MCP: %v %+v", err, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: read, Arguments: map[string]any{"path": "../x"}})
	if err != nil || !res.IsError {
		t.Fatalf("a path outside over MCP: %v %+v", err, res)
	}
}

func TestMCPElicitationAnswersTheApproval(t *testing.T) {
	for _, tc := range []struct {
		action, choice string
		runs           bool
	}{
		{"accept", "continue", true},
		{"accept", "abort", false},
		{"decline", "", false},
		{"cancel", "", false},
	} {
		t.Run(tc.action+" "+tc.choice, func(t *testing.T) {
			f := newFixture(t, "")
			asked := 0
			cs := stdioClient(t, f, func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked++
				if !strings.Contains(r.Params.Message, "write_file") {
					t.Errorf("the question does not name the tool: %q", r.Params.Message)
				}
				return &mcp.ElicitResult{Action: tc.action, Content: map[string]any{"decision": tc.choice}}, nil
			})
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: wireName(t, cs, "write_file"), Arguments: map[string]any{"path": "b.txt", "content": "x"}})
			if err != nil {
				t.Fatal(err)
			}
			if asked != 1 || res.IsError == tc.runs {
				t.Fatalf("asked %d times; isError=%v %q", asked, res.IsError, text(res))
			}
		})
	}
}

func wireName(t *testing.T, cs *mcp.ClientSession, suffix string) string {
	t.Helper()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		if strings.HasSuffix(tl.Name, suffix) {
			return tl.Name
		}
	}
	t.Fatalf("no tool ending in %s", suffix)
	return ""
}

func TestHTTPNeedsTheTokenAndALoopbackOrigin(t *testing.T) {
	f := newFixture(t, "")
	srv := httptest.NewServer(NewHTTPHandler(f.b, "secret"))
	defer srv.Close()
	for _, tc := range []struct {
		name, auth, origin string
		want               int
	}{
		{"no token", "", "", http.StatusUnauthorized},
		{"wrong token", "Bearer nope", "", http.StatusUnauthorized},
		{"foreign origin", "Bearer secret", "https://evil.example", http.StatusForbidden},
		{"bad origin", "Bearer secret", "::", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{}`))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	// The right token from a loopback origin reaches the MCP server.
	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil)
	hc := &http.Client{Transport: bearer{"secret"}}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"http://localhost:3000", "http://127.0.0.1", "http://[::1]:8080"} {
		if !loopbackOrigin(o) {
			t.Errorf("%s is loopback", o)
		}
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	r.Header.Set("Origin", "http://localhost")
	return http.DefaultTransport.RoundTrip(r)
}
