package mcpserve

import (
	"encoding/json"
	"errors"
	"testing"

	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A server's "resource not found" in the code of 2025-11-25 (-32002)
// reaches a 2026-07-28 client as -32602 with the URI in data (SEP-2164);
// an older client gets it as the server sent it, and other errors pass
// unchanged.
func TestResourceNotFoundIsRenumberedForAModernClient(t *testing.T) {
	const uri = "test://gone"
	old := &sdkjsonrpc.Error{Code: -32002, Message: "Resource not found"}
	withData := &sdkjsonrpc.Error{Code: -32002, Message: "Resource not found", Data: json.RawMessage(`{"uri":"test://asked","why":"gone"}`)}
	other := &sdkjsonrpc.Error{Code: -32603, Message: "boom"}
	cases := []struct {
		name     string
		err      error
		modern   bool
		code     int64
		data     string
		sameAsIn bool
	}{
		{"modern, no data", old, true, -32602, `{"uri":"test://gone"}`, false},
		{"modern, data kept", withData, true, -32602, `{"uri":"test://asked","why":"gone"}`, false},
		{"legacy client", old, false, -32002, ``, true},
		{"another error", other, true, -32603, ``, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := resourceNotFound(c.err, uri, c.modern)
			if c.sameAsIn {
				if got != c.err {
					t.Fatalf("changed: %v", got)
				}
				return
			}
			var we *sdkjsonrpc.Error
			if !errors.As(got, &we) || we.Code != c.code {
				t.Fatalf("got %v, want code %d", got, c.code)
			}
			var gotData, want any
			_ = json.Unmarshal(we.Data, &gotData)
			_ = json.Unmarshal([]byte(c.data), &want)
			if g, w := mustJSON(gotData), mustJSON(want); g != w {
				t.Errorf("data %s, want %s", g, w)
			}
			if we.Message != "Resource not found" {
				t.Errorf("message %q changed", we.Message)
			}
		})
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
