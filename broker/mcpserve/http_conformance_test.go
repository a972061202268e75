package mcpserve

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// rawHTTP is an MCP session over pml serve's handler driven frame by
// frame, as the conformance suite drives it.
type rawHTTP struct {
	t       *testing.T
	url     string
	session string
}

func newRawHTTP(t *testing.T) *rawHTTP {
	t.Helper()
	f := newFixture(t, "")
	srv := httptest.NewServer(NewHTTPHandler(f.b, "secret"))
	t.Cleanup(srv.Close)
	c := &rawHTTP{t: t, url: srv.URL}
	resp := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	c.session = resp.Header.Get("Mcp-Session-Id")
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if c.session == "" {
		t.Fatal("initialize gave no Mcp-Session-Id")
	}
	resp = c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: HTTP %d", resp.StatusCode)
	}
	return c
}

func (c *rawHTTP) post(body string) *http.Response {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// An unknown method gets JSON-RPC's -32601 with the request's id (the
// go-sdk v1.8.0 alone answered a plain-text HTTP 400), and the session
// goes on.
func TestHTTPUnknownMethodIsAJSONRPCMethodNotFound(t *testing.T) {
	c := newRawHTTP(t)
	resp := c.post(`{"jsonrpc":"2.0","id":7,"method":"foo/bar","params":{}}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("HTTP %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var r struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.ID != 7 || r.Error.Code != -32601 || !strings.Contains(r.Error.Message, "foo/bar") {
		t.Fatalf("answer %s (%v)", b, err)
	}
	// Other refusals keep the SDK's answer: an unknown notification is
	// never answered in JSON-RPC, so HTTP 400 stays.
	resp = c.post(`{"jsonrpc":"2.0","method":"notifications/foo"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown notification: HTTP %d, want 400", resp.StatusCode)
	}
	// A request refused for another reason keeps the SDK's 400 and text.
	resp = c.post(`{"jsonrpc":"2.0","id":9,"method":"tools/call"}`)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "params") {
		t.Errorf("tools/call without params: HTTP %d: %s", resp.StatusCode, b)
	}
	// The session still answers.
	resp = c.post(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"id":8`) {
		t.Fatalf("ping after: HTTP %d: %s", resp.StatusCode, b)
	}
}

// A POST's SSE stream starts with a priming event that has an id, no data
// and a retry field (SEP-1699).
func TestHTTPStreamsStartWithAPrimingEvent(t *testing.T) {
	c := newRawHTTP(t)
	resp := c.post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	var first []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != "" {
		first = append(first, sc.Text())
	}
	ev := strings.Join(first, "\n")
	var id, retry, data bool
	for _, l := range first {
		switch {
		case strings.HasPrefix(l, "id: ") && len(l) > 4:
			id = true
		case l == "retry: 1000":
			retry = true
		case strings.HasPrefix(l, "data:"):
			data = strings.TrimSpace(strings.TrimPrefix(l, "data:")) == ""
		}
	}
	if !id || !retry || !data {
		t.Fatalf("first event is not a priming event with an id, retry: 1000 and empty data:\n%s", ev)
	}
	var rest strings.Builder
	for sc.Scan() {
		rest.WriteString(sc.Text() + "\n")
	}
	if !strings.Contains(rest.String(), `"id":2`) {
		t.Fatalf("no answer after the priming event: %s", rest.String())
	}
}
