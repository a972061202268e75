package upstream

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

func TestAServersParamlessElicitationIsRefusedBeforeAnyHandler(t *testing.T) {
	reached := false
	h := guardRequests("srv", zerolog.New(io.Discard))(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		reached = true
		return nil, nil
	})
	for method, req := range map[string]mcp.Request{
		"elicitation/create":     &mcp.ElicitRequest{},
		"sampling/createMessage": &mcp.CreateMessageRequest{},
	} {
		_, err := h(context.Background(), method, req)
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || reached {
			t.Errorf("%s without params: %v (handler reached: %v)", method, err, reached)
		}
	}
}

func TestAPanicAnsweringAServerIsAnInternalError(t *testing.T) {
	h := guardRequests("srv", zerolog.New(io.Discard))(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		panic("boom")
	})
	_, err := h(context.Background(), "roots/list", &mcp.ListRootsRequest{})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError {
		t.Errorf("got %v", err)
	}
}
