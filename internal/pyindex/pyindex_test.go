package pyindex

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	page := `<html><body>
<a href="/f/mcp_server_time-0.9.0-py3-none-any.whl#sha256=aa">mcp_server_time-0.9.0-py3-none-any.whl</a>
<a href="/f/mcp_server_time-0.10.0-py3-none-any.whl#sha256=bb">mcp_server_time-0.10.0-py3-none-any.whl</a>
<a href="/f/mcp_server_time-1.0rc1-py3-none-any.whl#sha256=cc">mcp_server_time-1.0rc1-py3-none-any.whl</a>
<a href="/f/mcp-server-time-0.11.0.tar.gz#sha256=dd">mcp-server-time-0.11.0.tar.gz</a>
<a href="/f/mcp_server_time-0.12.0-cp27-none-win32.whl#sha256=ee">mcp_server_time-0.12.0-cp27-none-win32.whl</a>
</body></html>`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "bob" || p != "hunter2" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/simple/mcp-server-time/" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(page))
	}))
	defer srv.Close()
	index := strings.Replace(srv.URL, "http://", "http://bob:hunter2@", 1) + "/simple/"
	ctx := context.Background()
	rel, err := Resolve(ctx, srv.Client(), index, "MCP_Server.Time", "")
	if err != nil || rel.Version != "0.10.0" || rel.SHA256 != "bb" {
		t.Fatalf("newest: %+v %v", rel, err)
	}
	if _, err := Resolve(ctx, srv.Client(), index, "mcp-server-time", "0.11.0"); !errors.Is(err, ErrNoWheel) || !strings.Contains(err.Error(), "compiler") {
		t.Errorf("sdist only: %v", err)
	}
	if _, err := Resolve(ctx, srv.Client(), index, "mcp-server-time", "0.12.0"); !errors.Is(err, ErrNoWheel) {
		t.Errorf("a wheel for another platform: %v", err)
	}
	if _, err := Resolve(ctx, srv.Client(), index, "mcp-server-time", "3.0.0"); !errors.Is(err, ErrNotFound) {
		t.Errorf("no such version: %v", err)
	}
	_, err = Resolve(ctx, srv.Client(), index, "nope", "")
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("no such package: %v", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("an error shows the password: %v", err)
	}
	bad := strings.Replace(index, "hunter2", "wrong", 1)
	if _, err := Resolve(ctx, srv.Client(), bad, "mcp-server-time", ""); err == nil || !strings.Contains(err.Error(), "refused") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("bad credentials: %v", err)
	}
}
