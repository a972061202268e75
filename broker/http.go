package broker

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/jsonrpc"
)

// NewHTTPHandler serves the broker over MCP Streamable HTTP. Every request
// needs "Authorization: Bearer <token>"; a request carrying an Origin
// header from anything but a loopback origin is refused, so a web page the
// user visits cannot drive the broker. Each MCP session has its own
// approvals.
func NewHTTPHandler(b *Broker, token string) http.Handler {
	server := NewMCPServer(b)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{MaxRequestBodyBytes: jsonrpc.MaxFrame, Logger: sdkLogger(b.log)})
	return guard(token, exactIDs(h))
}

// exactIDs answers a request whose numeric id the go-sdk would change
// (beyond 2^53: it decodes ids through a float64) with an error under the
// id as sent, as pml stdio's frame filter does; the SDK would answer it
// under another id, which its client never sees.
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

func guard(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !loopbackOrigin(o) {
			http.Error(w, "pml: cross-origin requests are refused (Origin "+o+")", http.StatusForbidden)
			return
		}
		got := []byte(r.Header.Get("Authorization"))
		if token == "" || subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pml"`)
			http.Error(w, "pml: missing or wrong bearer token (see the token pml serve printed, or PML_SERVE_TOKEN)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
