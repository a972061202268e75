package mcpserve

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/pml-dev/pml/internal/jsonrpc"
)

// exactIDs answers a request whose numeric id the go-sdk would change
// (beyond 2^53: it decodes ids through a float64) with an error under the
// id as sent, as pml stdio's frame filter does; the SDK would answer it
// under another id, which its client never sees (found by FuzzMCP).
func exactIDs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		// The SDK reads the whole body too, to the same limit.
		body, err := io.ReadAll(io.LimitReader(r.Body, jsonrpc.MaxFrame+1))
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err == nil {
			if id := jsonrpc.Member(body, "id"); id != nil && jsonrpc.IntegerID(id) && !jsonrpc.ValidID(id) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`+"\n", id, jsonrpc.CodeInvalidRequest, jsonrpc.IDProblem)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
