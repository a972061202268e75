package mcpserve

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/jsonrpc"
)

// NewHTTPHandler serves the broker over MCP Streamable HTTP. Every request
// needs "Authorization: Bearer <token>"; a request carrying an Origin
// header from anything but a loopback origin is refused, so a web page the
// user visits cannot drive the broker. Each MCP session has its own
// approvals.
func NewHTTPHandler(b Backend, token string) http.Handler {
	return newHTTPHandler(b, token, view{})
}

// newHTTPHandler is NewHTTPHandler showing the tools of v.
func newHTTPHandler(b Backend, token string, v view) http.Handler {
	server := newMCPServer(b, v)
	// A call ends with the POST that carried it (http_cancel.go).
	p := &posts{}
	server.AddReceivingMiddleware(recoverRequests(func() zerolog.Logger { return *b.Log() }), p.cancelWithPost)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{MaxRequestBodyBytes: jsonrpc.MaxFrame, Logger: sdkLogger(*b.Log()),
			// SSE streams are primed and resumable (http_prime.go): a
			// client whose stream drops gets what it missed (bounded:
			// the store keeps the last 10 MiB of events).
			EventStore: mcp.NewMemoryEventStore(nil)})
	// Where the go-sdk (v1.8.0) answers off the protocol, wrappers put it
	// right: http_batch.go, http_ids.go, http_notfound.go, http_prime.go. A panic in the handler is
	// answered and logged (recover.go); a call ends with its POST
	// (http_cancel.go).
	// A batch is refused on the revisions without batches, by the
	// session's agreed revision (http_batch.go).
	legacy := refuseBatches(server, exactIDs(methodNotFound(primeRetry(p.tiePosts(h)))))
	// MCP 2026-07-28 is stateless: no initialize, no session, each
	// request names its revision, client and capabilities in its _meta
	// (http_modern.go). The go-sdk serves it only on a stateless handler,
	// beside which the stateful one keeps serving the older revisions;
	// both serve the one server, so a modern and a legacy client see
	// the same tools.
	modern := refuseModernBatches(exactIDs(p.tiePosts(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, MaxRequestBodyBytes: jsonrpc.MaxFrame, Logger: sdkLogger(*b.Log())}))))
	return guard(token, recoverHTTP(*b.Log(), byEra(legacy, modern)))
}

// GuardHTTP is h behind pml serve's rules (bearer token, loopback
// origins only), for what pml serve serves beside /mcp (/metrics).
func GuardHTTP(token string, h http.Handler) http.Handler { return guard(token, h) }

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
