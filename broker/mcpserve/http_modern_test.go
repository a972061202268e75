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

func modernPost(t *testing.T, url, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// server/discover is answered with no session and no initialize, and
// names 2026-07-28 among the revisions pml serve offers.
func TestHTTPDiscoverWithoutASession(t *testing.T) {
	f := newFixture(t, "")
	srv := httptest.NewServer(NewHTTPHandler(f.b, "secret"))
	t.Cleanup(srv.Close)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	code, body := modernPost(t, srv.URL, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`,
		map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"})
	if code != 200 || !strings.Contains(body, `"2026-07-28"`) || !strings.Contains(body, `"resultType":"complete"`) {
		t.Fatalf("server/discover: HTTP %d %s", code, body)
	}
	// Without the header: the request still reaches the modern handler,
	// which names what is missing.
	code, body = modernPost(t, srv.URL, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+meta+`}}`, nil)
	if code != 400 || strings.Contains(body, "-32022") {
		t.Fatalf("a modern tools/list without its header: HTTP %d %s", code, body)
	}
	// A go-sdk client on 2026-07-28 lists the tools.
	client := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL,
		HTTPClient: &http.Client{Transport: authed{"secret"}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) == 0 {
		t.Fatalf("tools/list on 2026-07-28: %v %v", res, err)
	}
	if cs.InitializeResult().ProtocolVersion != "2026-07-28" {
		t.Fatalf("agreed on %s", cs.InitializeResult().ProtocolVersion)
	}
}

type authed struct{ token string }

func (a authed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.token)
	return http.DefaultTransport.RoundTrip(r)
}
