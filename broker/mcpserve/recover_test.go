package mcpserve

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/wirename"
)

func TestAPanicInAHandlerAnswersItsRequestWithAnInternalErrorNamingIt(t *testing.T) {
	var logs strings.Builder
	log := zerolog.New(&logs)
	h := recoverRequests(func() zerolog.Logger { return log })(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		panic("boom")
	})
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: wirename.Encode("shell:exec")}}
	res, err := h(context.Background(), "tools/call", req)
	var je *jsonrpc.Error
	if res != nil || !errors.As(err, &je) {
		t.Fatalf("got %v, %v; want a JSON-RPC error", res, err)
	}
	if je.Code != jsonrpc.CodeInternalError || !strings.Contains(je.Message, "tools/call of shell:exec") || !strings.Contains(je.Message, "boom") || !strings.Contains(je.Message, "pml kept running") {
		t.Errorf("error: %d %q", je.Code, je.Message)
	}
	if n := strings.Count(logs.String(), "pml panicked"); n != 1 || !strings.Contains(logs.String(), "recover_test.go") {
		t.Errorf("logged %d times, want once with the stack:\n%s", n, logs.String())
	}
}

func TestARequestEndsWithThePOSTThatCarriedIt(t *testing.T) {
	p := &posts{}
	started := make(chan struct{})
	ended := make(chan error, 1)
	handler := p.cancelWithPost(func(ctx context.Context, _ string, _ mcp.Request) (mcp.Result, error) {
		close(started)
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	})
	ctx, drop := context.WithCancel(context.Background())
	srv := p.tiePosts(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(postHeader) == "forged" {
			t.Error("a client's own mark was kept")
		}
		// As the go-sdk does: the request's extra carries the POST's header.
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}, Extra: &mcp.RequestExtra{Header: r.Header}}
		go func() { _, _ = handler(context.Background(), "tools/call", req) }()
		<-started
		<-r.Context().Done()
	}))
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil).WithContext(ctx)
	r.Header.Set(postHeader, "forged")
	go srv.ServeHTTP(httptest.NewRecorder(), r)
	<-started
	drop()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not end with its POST")
	}
}

func TestAPanicInPMLServesHTTPHandlerIsA500(t *testing.T) {
	var logs strings.Builder
	h := recoverHTTP(zerolog.New(&logs), http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/mcp", nil))
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), "pml kept running") {
		t.Errorf("got %d %q", w.Code, w.Body.String())
	}
	if !strings.Contains(logs.String(), "pml panicked while serving an HTTP POST request") {
		t.Errorf("log:\n%s", logs.String())
	}
}
