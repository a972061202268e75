//go:build linux

package e2e

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
)

// codeOnRegistry puts reg (a real `pml registry serve`) behind one
// loopback origin that also serves code under /code/ with code: a
// registry's codeUrl may name this machine only on the registry's own
// origin (issue 50, finding 8), so the seeds' two steps (metadata, then
// code) are served as a registry would, from one place. Entries name
// their code relative to it ("/code/s.ts"). Closing the server takes the
// registry and the code away together (offline runs).
func codeOnRegistry(t *testing.T, reg *registryServer, code http.Handler) *httptest.Server {
	t.Helper()
	target, err := url.Parse(reg.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/code/") {
			code.ServeHTTP(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// codeFile serves one piece of TypeScript.
func codeFile(src string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/typescript")
		_, _ = w.Write([]byte(src))
	})
}
