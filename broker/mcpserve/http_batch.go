package mcpserve

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// refuseBatches draws pml serve's batch line where the revision the
// session agreed on draws it: JSON-RPC batches exist on 2025-03-26 (and
// 2024-11-05) and were removed in 2025-06-18, as pml stdio has it
// (batchRule). The go-sdk's handler (v1.8.0) reads the revision from the
// request's MCP-Protocol-Version header alone and, without one, assumes
// 2025-03-26: a session that initialized on 2025-11-25 then had its
// batches answered (issue 50); and where it does refuse, it answers with
// plain text, not JSON-RPC. The MCP transport lets a server rely on the
// revision negotiated at initialize: this wrapper does, and answers a
// refused batch with HTTP 400 and a JSON-RPC error (-32600, invalid
// request, id null: a batch has no one id). A batch the session's
// revision has goes on to the go-sdk unchanged.
func refuseBatches(server *mcp.Server, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		br := bufio.NewReader(r.Body)
		r.Body = readCloser{br, r.Body}
		if !startsBatch(br) {
			next.ServeHTTP(w, r)
			return
		}
		v := r.Header.Get("Mcp-Protocol-Version")
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
			if sv := sessionRevision(server, sid); sv > v {
				v = sv
			}
		}
		if v < "2025-06-18" {
			// 2025-03-26 and before (or a session the go-sdk does not
			// know, which it answers itself).
			next.ServeHTTP(w, r)
			return
		}
		writeRPCError(w, http.StatusBadRequest, -32600, fmt.Sprintf("JSON-RPC batches were removed in MCP protocol 2025-06-18 and this session uses %s: send one message per request", v))
	})
}

// startsBatch reports whether the body's first byte past white space is
// '[': a JSON-RPC batch. It peeks, so the body reads whole afterwards.
func startsBatch(br *bufio.Reader) bool {
	for n := 1; n <= 4096; n++ {
		b, err := br.Peek(n)
		if len(b) < n || err != nil {
			return false
		}
		switch b[n-1] {
		case ' ', '\t', '\r', '\n':
			continue
		case '[':
			return true
		default:
			return false
		}
	}
	return false
}

// sessionRevision is the revision the session sid agreed on at
// initialize, "" when no such session has initialized.
func sessionRevision(server *mcp.Server, sid string) string {
	for ss := range server.Sessions() {
		if ss.ID() != sid {
			continue
		}
		if ip := ss.InitializeParams(); ip != nil {
			return agreedRevision(ip.ProtocolVersion)
		}
		return ""
	}
	return ""
}

// writeRPCError answers with a JSON-RPC error response of id null.
func writeRPCError(w http.ResponseWriter, status, code int, msg string) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// readCloser reads from r and closes c.
type readCloser struct {
	io.Reader
	io.Closer
}
