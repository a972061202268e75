package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

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

// A server that sends elicitation/create without params (the go-sdk's
// own elicit handler read them, in a goroutine of its own: pml ended)
// gets an invalid-params error, and the session goes on.
func TestAServersParamlessElicitationIsAnsweredAndPMLGoesOn(t *testing.T) {
	for _, oneShot := range []bool{false, true} {
		s := New(Options{Name: "srv", Logger: zerolog.New(io.Discard)})
		ct, st := mcp.NewInMemoryTransports()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The server's side, frame by frame.
		srv, err := st.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		connected := make(chan *mcp.ClientSession, 1)
		go func() {
			cs, err := s.newClient(s.clientOptions(oneShot, nil)).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
			if err != nil {
				t.Error(err)
			}
			connected <- cs
		}()
		read := func(want func(jsonrpc.Message) bool) jsonrpc.Message {
			for {
				m, err := srv.Read(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if want(m) {
					return m
				}
			}
		}
		init := read(func(m jsonrpc.Message) bool {
			r, ok := m.(*jsonrpc.Request)
			return ok && r.Method == "initialize"
		}).(*jsonrpc.Request)
		if err := srv.Write(ctx, &jsonrpc.Response{ID: init.ID, Result: json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"s","version":"1"}}`)}); err != nil {
			t.Fatal(err)
		}
		cs := <-connected
		if cs == nil {
			t.FailNow()
		}
		defer cs.Close()
		id, _ := jsonrpc.MakeID(float64(41))
		if err := srv.Write(ctx, &jsonrpc.Request{ID: id, Method: "elicitation/create"}); err != nil {
			t.Fatal(err)
		}
		res := read(func(m jsonrpc.Message) bool {
			r, ok := m.(*jsonrpc.Response)
			return ok && r.ID == id
		}).(*jsonrpc.Response)
		var je *jsonrpc.Error
		if !errors.As(res.Error, &je) || je.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("one-shot %v: got %v %s", oneShot, res.Error, res.Result)
		}
	}
}
