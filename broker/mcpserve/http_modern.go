package mcpserve

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/jsonrpc"
)

// byEra sends a request of MCP 2026-07-28 or later to modern, pml serve's
// stateless handler, and every other to legacy, its stateful one (the
// revisions with initialize and Mcp-Session-Id).
//
// A request is modern when its MCP-Protocol-Version header names
// 2026-07-28 or later (the transport requires the header on every
// request of those revisions), or, without a session, when it is a
// server/discover (how a dual-era client probes) or its _meta names a
// protocol version (a modern request that forgot the header: the
// stateless handler answers it with the error 2026-07-28 defines, a
// header mismatch, rather than the stateful one's "only the older
// revisions", which is not true of pml serve). Everything a modern
// request needs travels in it (requeststate.go), so any pml serve of the
// workspace answers it.
func byEra(legacy, modern http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
			if v >= modernVersion {
				modern.ServeHTTP(w, r)
			} else {
				legacy.ServeHTTP(w, r)
			}
			return
		}
		if r.Method != http.MethodPost || r.Body == nil || r.Header.Get("Mcp-Session-Id") != "" {
			legacy.ServeHTTP(w, r)
			return
		}
		// Both handlers read the whole body, to the same limit.
		body, err := io.ReadAll(io.LimitReader(r.Body, jsonrpc.MaxFrame+1))
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err == nil && modernBody(body) {
			modern.ServeHTTP(w, r)
			return
		}
		legacy.ServeHTTP(w, r)
	})
}

// modernBody reports whether body is one request that only a modern
// server answers: server/discover, or one whose _meta names a protocol
// version.
func modernBody(body []byte) bool {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' || json.Unmarshal(body, &m) != nil {
		return false
	}
	if m.Method == "server/discover" {
		return true
	}
	_, named := m.Params.Meta[mcp.MetaKeyProtocolVersion]
	return named
}

// refuseModernBatches answers a JSON-RPC batch sent on MCP 2026-07-28 with
// the JSON-RPC error pml serve gives a batch on any revision without
// batches (http_batch.go), where the go-sdk answers plain text.
func refuseModernBatches(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, jsonrpc.MaxFrame+1))
		r.Body = io.NopCloser(bytes.NewReader(body))
		if t := bytes.TrimLeft(body, " \t\r\n"); err == nil && len(t) > 0 && t[0] == '[' {
			writeRPCError(w, http.StatusBadRequest, jsonrpc.CodeInvalidRequest,
				"JSON-RPC batches were removed in MCP protocol 2025-06-18 and this request uses "+modernVersion+": send one message per request")
			return
		}
		next.ServeHTTP(w, r)
	})
}
