//go:build linux

package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestAServersMissingCapabilityErrorReachesAModernClient: a server that
// refuses a call with MCP 2026-07-28's -32021
// (MissingRequiredClientCapability; the probe's needs_sampling, data
// naming sampling) is answered to a modern client of pml serve with that
// error, its data intact, and HTTP 400 as the 2026-07-28 transport
// requires of it, so the client learns what to declare. Before, it got a
// tool result that failed (HTTP 200), with the code and data gone. The
// call is audited once.
func TestAServersMissingCapabilityErrorReachesAModernClient(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, `, "workspace": "none", "protocol": "2026-07-28"`))
	endpoint, token := startServe(t, ws)

	_, _, body := rawModern(t, endpoint, token, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+modernMeta+`}}`, modernHeaders("tools/list", ""))
	res, rpcErr := answerOf(body)
	if res == nil {
		t.Fatalf("tools/list: %v %s", rpcErr, body)
	}
	var name string
	tools, _ := res["tools"].([]any)
	for _, tl := range tools {
		if n, _ := tl.(map[string]any)["name"].(string); strings.HasSuffix(n, "needs_sampling") {
			name = n
		}
	}
	if name == "" {
		t.Fatalf("the probe's needs_sampling is not listed: %s", body)
	}

	q, _ := json.Marshal(name)
	code, _, body := rawModern(t, endpoint, token, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":`+string(q)+`,"arguments":{},`+modernMeta+`}}`, modernHeaders("tools/call", name))
	res, rpcErr = answerOf(body)
	if rpcErr == nil {
		t.Fatalf("want the server's -32021 as a JSON-RPC error, got HTTP %d and a result: %v", code, res)
	}
	if c, _ := rpcErr["code"].(float64); c != -32021 {
		t.Errorf("want code -32021 (MissingRequiredClientCapability), got %v: %s", rpcErr["code"], body)
	}
	data, _ := rpcErr["data"].(map[string]any)
	req, _ := data["requiredCapabilities"].(map[string]any)
	if _, ok := req["sampling"].(map[string]any); !ok {
		t.Errorf("want data.requiredCapabilities.sampling as the server sent it: %s", body)
	}
	if code != http.StatusBadRequest {
		t.Errorf("want HTTP 400 for -32021 (2026-07-28 transport), got %d", code)
	}
	if !strings.Contains(body, `"id":7`) {
		t.Errorf("the error does not carry the request's id: %s", body)
	}
	// The call ran, and is audited once, as a call of the server's that
	// failed: not also as one the MCP layer refused before any step.
	var entries []string
	for _, e := range auditTools(t, ws, 0) {
		if strings.Contains(e, "needs_sampling") {
			entries = append(entries, e)
		}
	}
	if len(entries) != 1 {
		t.Errorf("want the call audited once, got %q", entries)
	}
}
