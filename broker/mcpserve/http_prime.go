package mcpserve

import (
	"bytes"
	"net/http"
	"strconv"
	"time"
)

// SSE priming (SEP-1699, protocol 2025-11-25). A server SHOULD start each
// SSE stream with an event that carries an id and no data, so that a
// client whose connection drops can reconnect with Last-Event-ID and miss
// nothing, and SHOULD say with "retry:" how long to wait first. The
// go-sdk (v1.8.0) writes that priming event only when its handler has an
// event store (pml serve now gives it one: NewHTTPHandler), and writes it
// without "retry:". primeRetry adds the field to the SDK's priming event.
// The SDK primes POST streams on 2025-11-25 and later only: earlier
// clients may not expect an event without data.

// sseRetry is the reconnection delay pml serve asks for: the server is on
// loopback, so a dropped stream is back within a second.
const sseRetry = time.Second

// sdkPrime is how the go-sdk's (v1.8.0) priming event starts (its
// writeEvent: "event: prime\nid: …\ndata: \n\n", in one write).
var sdkPrime = []byte("event: prime\n")

func primeRetry(next http.Handler) http.Handler {
	retry := []byte("retry: " + strconv.FormatInt(sseRetry.Milliseconds(), 10) + "\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&primeWriter{ResponseWriter: w, retry: retry}, r)
	})
}

type primeWriter struct {
	http.ResponseWriter
	retry []byte
}

func (w *primeWriter) Write(p []byte) (int, error) {
	if !bytes.HasPrefix(p, sdkPrime) {
		return w.ResponseWriter.Write(p)
	}
	i := bytes.Index(p, []byte("\ndata:"))
	if i < 0 || bytes.Contains(p[:i], []byte("\nretry:")) {
		return w.ResponseWriter.Write(p)
	}
	ev := make([]byte, 0, len(p)+len(w.retry))
	ev = append(ev, p[:i+1]...)
	ev = append(ev, w.retry...)
	ev = append(ev, p[i+1:]...)
	if _, err := w.ResponseWriter.Write(ev); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap lets http.ResponseController flush each event.
func (w *primeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
