package mcpserve

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A client that drops its HTTP connection in the middle of a call cancels
// the call, as a stdio client that goes away does: its container is
// killed and its slot freed. The go-sdk runs each request under its
// session's context, detached from the POST that carried it (on the
// protocols before 2026-07-28 a stream may be resumed by another request,
// with an event store, which pml serve has not): without this the call
// ran to its end for no one. tiePosts marks each POST with a header the
// go-sdk hands to the request (RequestExtra.Header); cancelWithPost then
// ends the request's context with the POST's.

// postHeader carries the mark; a client's own value is replaced.
const postHeader = "Pml-Post"

// posts are the POSTs being served, by mark.
type posts struct {
	next atomic.Uint64
	m    sync.Map // mark → context.Context of the POST
}

// tiePosts marks each POST to h and keeps its context while it is served.
func (p *posts) tiePosts(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(postHeader)
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		mark := strconv.FormatUint(p.next.Add(1), 10)
		r.Header.Set(postHeader, mark)
		p.m.Store(mark, r.Context())
		defer p.m.Delete(mark)
		h.ServeHTTP(w, r)
	})
}

// cancelWithPost is the receiving middleware that ends a request's
// context when the POST that carried it ends: the client went away (the
// answer could no longer reach it), or the POST is done, and then so is
// the request. Notifications are left alone: their POST is answered
// (202) before they are handled.
func (p *posts) cancelWithPost(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		extra := req.GetExtra()
		if extra == nil || extra.Header == nil || strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		mark := extra.Header.Get(postHeader)
		if mark == "" {
			return next(ctx, method, req)
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		post, ok := p.m.Load(mark)
		if !ok {
			// The POST ended before the request was handled: no
			// answer can reach its client.
			cancel()
		} else {
			defer context.AfterFunc(post.(context.Context), cancel)()
		}
		return next(ctx, method, req)
	}
}
