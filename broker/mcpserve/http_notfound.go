package mcpserve

import (
	"bytes"
	"io"
	"net/http"
	"strconv"

	sdkjsonrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// methodNotFound makes pml serve answer a request for a method it does not
// have with the JSON-RPC error -32601 (method not found), as JSON-RPC and
// MCP have it and as pml stdio answers. The go-sdk's Streamable HTTP
// handler (v1.8.0) refuses such a request before any session sees it,
// with a bare HTTP 400 and a plain-text body ("JSON RPC not handled:
// \"foo/bar\" unsupported"; only on protocol 2026-07-28 does it send
// -32601), which a client cannot match to its request. This wrapper keeps
// a copy of the POST body as the SDK reads it and, when the SDK answers
// with that 400, sends instead a JSON-RPC error response carrying the
// request's id, HTTP 200. Every other answer passes unchanged.
func methodNotFound(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body := &bodyCopy{rc: r.Body}
		r.Body = body
		nw := &notFoundWriter{ResponseWriter: w, body: body}
		next.ServeHTTP(nw, r)
		nw.finish()
	})
}

// sdkNotHandled starts the go-sdk's (v1.8.0) plain-text answer to a
// method it does not handle: jsonrpc2.ErrNotHandled's text.
const sdkNotHandled = "JSON RPC not handled"

// maxBodyCopy bounds the copy: a request for an unknown method is small,
// and a large body is never one the rewrite needs to read.
const maxBodyCopy = 64 << 10

// bodyCopy is the request body, copied (its first maxBodyCopy bytes) as
// the SDK reads it.
type bodyCopy struct {
	rc   io.ReadCloser
	buf  bytes.Buffer
	over bool
}

func (b *bodyCopy) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 && !b.over {
		if b.buf.Len()+n > maxBodyCopy {
			b.over = true
			b.buf.Reset()
		} else {
			b.buf.Write(p[:n])
		}
	}
	return n, err
}

func (b *bodyCopy) Close() error { return b.rc.Close() }

// call returns the id and method of the body when it is a single JSON-RPC
// request (not a notification, not a batch).
func (b *bodyCopy) call() (sdkjsonrpc.ID, string, bool) {
	if b.over {
		return sdkjsonrpc.ID{}, "", false
	}
	msg, err := sdkjsonrpc.DecodeMessage(bytes.TrimSpace(b.buf.Bytes()))
	if err != nil {
		return sdkjsonrpc.ID{}, "", false
	}
	req, ok := msg.(*sdkjsonrpc.Request)
	if !ok || !req.IsCall() {
		return sdkjsonrpc.ID{}, "", false
	}
	return req.ID, req.Method, true
}

// notFoundWriter holds back an HTTP 400 (and its body) until it is known
// whether it is the SDK's answer to an unknown method.
type notFoundWriter struct {
	http.ResponseWriter
	body *bodyCopy
	held bool // a 400 was written and is held back
	text bytes.Buffer
}

func (w *notFoundWriter) WriteHeader(code int) {
	if code == http.StatusBadRequest && !w.held {
		if _, _, ok := w.body.call(); ok {
			w.held = true
			return
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *notFoundWriter) Write(p []byte) (int, error) {
	if w.held {
		if w.text.Len() < maxBodyCopy {
			w.text.Write(p)
		}
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (the SDK
// flushes each SSE event through it).
func (w *notFoundWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish sends what was held back: the JSON-RPC error for an unknown
// method, else the SDK's own 400 as it was.
func (w *notFoundWriter) finish() {
	if !w.held {
		return
	}
	id, method, _ := w.body.call()
	if !bytes.HasPrefix(w.text.Bytes(), []byte(sdkNotHandled)) {
		w.ResponseWriter.WriteHeader(http.StatusBadRequest)
		_, _ = w.ResponseWriter.Write(w.text.Bytes())
		return
	}
	out, err := sdkjsonrpc.EncodeMessage(&sdkjsonrpc.Response{ID: id, Error: &sdkjsonrpc.Error{
		Code:    sdkjsonrpc.CodeMethodNotFound,
		Message: "method not found: " + strconv.Quote(method),
	}})
	if err != nil {
		w.ResponseWriter.WriteHeader(http.StatusBadRequest)
		_, _ = w.ResponseWriter.Write(w.text.Bytes())
		return
	}
	h := w.ResponseWriter.Header()
	h.Del("X-Content-Type-Options")
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.ResponseWriter.WriteHeader(http.StatusOK)
	_, _ = w.ResponseWriter.Write(out)
}
