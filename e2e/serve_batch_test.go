//go:build linux

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestServeBatchesFollowTheSessionsRevision (issue 50): pml serve takes
// a JSON-RPC batch on a session that agreed on 2025-03-26 (which has
// batches) and refuses one on 2025-06-18 and 2025-11-25 (which removed
// them) with HTTP 400 and the JSON-RPC error -32600 saying why, whether
// the request carries MCP-Protocol-Version or leaves it out; the session
// answers on. Before, a 2025-11-25 session's batch without the header was
// answered (the go-sdk assumed 2025-03-26), and with it was refused in
// plain text, while docs/serve.md said batches are refused from
// 2025-06-18.
func TestServeBatchesFollowTheSessionsRevision(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, "")
	url, token := startServe(t, ws)
	post := func(session, version, body string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		if version != "" {
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if session == "" {
			session = resp.Header.Get("Mcp-Session-Id")
		}
		return resp.StatusCode, session, string(b)
	}
	const batch = `[{"jsonrpc":"2.0","id":"b1","method":"ping"},{"jsonrpc":"2.0","id":"b2","method":"ping"}]`
	for _, v := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		code, session, body := post("", "", `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"`+v+`","capabilities":{},"clientInfo":{"name":"batch-e2e","version":"1"}}}`)
		if code != http.StatusOK || session == "" || !strings.Contains(body, `"protocolVersion":"`+v+`"`) {
			t.Fatalf("initialize on %s: HTTP %d, session %q\n%s", v, code, session, body)
		}
		if code, _, body := post(session, v, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
			t.Fatalf("notifications/initialized on %s: HTTP %d %s", v, code, body)
		}
		for _, header := range []string{"", v} {
			code, _, body := post(session, header, batch)
			if v == "2025-03-26" {
				if code != http.StatusOK || !strings.Contains(body, `"b1"`) || !strings.Contains(body, `"b2"`) {
					t.Errorf("a batch on %s (header %q): HTTP %d, want both pings answered\n%s", v, header, code, body)
				}
				continue
			}
			var r struct {
				ID    json.RawMessage `json:"id"`
				Error *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if code != http.StatusBadRequest || json.Unmarshal([]byte(body), &r) != nil || r.Error == nil || r.Error.Code != -32600 ||
				string(r.ID) != "null" || !strings.Contains(r.Error.Message, "removed in MCP protocol 2025-06-18") || !strings.Contains(r.Error.Message, v) {
				t.Errorf("a batch on %s (header %q): HTTP %d, want 400 and JSON-RPC -32600 saying why\n%s", v, header, code, body)
			}
		}
		if code, _, body := post(session, v, `{"jsonrpc":"2.0","id":"after","method":"ping"}`); code != http.StatusOK || !strings.Contains(body, `"after"`) {
			t.Errorf("a ping after the batch on %s: HTTP %d\n%s", v, code, body)
		}
	}
}
