//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/upstream"
)

// aServer is a fake Server: Prepare fails with prepareErr and counts.
type aServer struct {
	prepareErr error
	prepared   int
}

func (s *aServer) Name() string                             { return "srv" }
func (s *aServer) Session() *upstream.Server                { return nil }
func (s *aServer) Prepare() error                           { s.prepared++; return s.prepareErr }
func (s *aServer) Env() ([]string, error)                   { return nil, nil }
func (s *aServer) Container() (container.Spec, []*mcp.Root) { return container.Spec{}, nil }

// aSend is a fake toServer.
type aSend struct {
	start bool
	reply func(ctx context.Context, tool string, req call.Request) (call.Result, error)
	sent  []string
}

func (a *aSend) starts() bool { return a.start }

func (a *aSend) send(ctx context.Context, tool string, req call.Request) (call.Result, error) {
	a.sent = append(a.sent, tool)
	return a.reply(ctx, tool, req)
}

var echoTool = toolbox.Tool{Name: "srv:echo"}

func TestAServerCallIsPreparedOnlyWhenItMayStartTheContainer(t *testing.T) {
	sb, _ := newTestSandbox(t, nil, time.Second)
	srv := &aServer{}
	ok := func(context.Context, string, call.Request) (call.Result, error) { return call.Result{Text: "ok"}, nil }
	to := &aSend{start: true, reply: ok}
	if res := callServer(context.Background(), call.NewCall(call.Request{}), sb, srv, echoTool, to); res.Text != "ok" || srv.prepared != 1 {
		t.Errorf("a call that may start it: %+v, prepared %d", res, srv.prepared)
	}
	if len(to.sent) != 1 || to.sent[0] != "echo" {
		t.Errorf("sent %v: the tool goes without its server's prefix", to.sent)
	}
	to = &aSend{start: false, reply: ok}
	callServer(context.Background(), call.NewCall(call.Request{}), sb, srv, echoTool, to)
	if srv.prepared != 1 {
		t.Error("a running server was prepared again")
	}
	srv.prepareErr = errors.New("not granted")
	to = &aSend{start: true, reply: ok}
	if res := callServer(context.Background(), call.NewCall(call.Request{}), sb, srv, echoTool, to); !res.IsError || res.Text != "not granted" || len(to.sent) != 0 {
		t.Errorf("a prepare that fails: %+v, sent %v", res, to.sent)
	}
}

func TestAServerCallIsBoundedBySandboxTimeout(t *testing.T) {
	sb, _ := newTestSandbox(t, nil, 50*time.Millisecond)
	wait := func(ctx context.Context, _ string, _ call.Request) (call.Result, error) {
		<-ctx.Done()
		return call.Result{}, ctx.Err()
	}
	res := callServer(context.Background(), call.NewCall(call.Request{}), sb, &aServer{}, echoTool, &aSend{reply: wait})
	if !strings.Contains(res.Text, "srv:echo timed out after 50ms (the server was told to cancel it; the limit is sandbox.timeout") {
		t.Errorf("text %q", res.Text)
	}
}

func TestServerCallErrorsSayWhatEndedTheCall(t *testing.T) {
	sb, _ := newTestSandbox(t, nil, time.Second)
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	live := context.Background()
	for _, c := range []struct {
		name   string
		err    error
		parent context.Context
		want   string
	}{
		{"the caller's deadline", context.DeadlineExceeded, expired, "srv:echo was stopped: " + callerDeadline},
		{"sandbox.timeout", context.DeadlineExceeded, live, "srv:echo timed out after 1s"},
		{"a cancel", context.Canceled, live, "srv:echo was cancelled"},
		{"the engine", fmt.Errorf("start: %w", container.ErrUnavailable), live, "unavailable: start"},
		{"the server's own", errors.New("it broke"), live, "it broke"},
		{"the caller's deadline during the start", &upstream.StartWaitError{Server: "srv", Bound: 30 * time.Second, Err: context.DeadlineExceeded}, expired,
			"srv:echo was stopped: " + callerDeadline + " before its server had started (the call never reached it; the start goes on within its own bound, 30s)"},
		{"sandbox.timeout during the start", &upstream.StartWaitError{Server: "srv", Bound: 30 * time.Second, Err: context.DeadlineExceeded}, live,
			"srv:echo was stopped: its limit of 1s (sandbox.timeout) passed before its server had started"},
		{"a cancel during the start", &upstream.StartWaitError{Server: "srv", Err: context.Canceled}, live, "srv:echo was cancelled"},
	} {
		res := serverCallError(sb, echoTool, c.err, c.parent)
		if !res.IsError || !strings.Contains(res.Text, c.want) {
			t.Errorf("%s: %q", c.name, res.Text)
		}
		if strings.Contains(c.name, "during the start") && strings.Contains(res.Text, "told to cancel") {
			t.Errorf("%s: nothing reached the server, but: %q", c.name, res.Text)
		}
	}
	if res := serverCallError(sb, echoTool, container.ErrImageMissing, live); !errors.Is(res.Err(), call.ErrUnavailable) {
		t.Errorf("a missing image: %q is not unavailable", res.Text)
	}
	p := sb.Policy()
	p.Timeout = 0
	sb.SetPolicy(p)
	if res := serverCallError(sb, echoTool, context.DeadlineExceeded, live); !strings.Contains(res.Text, "was stopped by a deadline") {
		t.Errorf("no sandbox.timeout: %q", res.Text)
	}
}

// aRelay is a relay that is only compared.
type aRelay struct{ upstream.Relay }

func TestADecodedCallSendsItsArgumentsAndTheCallersRelay(t *testing.T) {
	relay := &aRelay{}
	var got struct {
		tool  string
		args  string
		token any
		meta  map[string]any
		relay upstream.Relay
	}
	d := decoded{args: map[string]any{"text": "hi"}, call: func(_ context.Context, tool string, args json.RawMessage, meta map[string]any, token any, r upstream.Relay) (*mcp.CallToolResult, error) {
		got.tool, got.args, got.token, got.meta, got.relay = tool, string(args), token, meta, r
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.ImageContent{}, &mcp.TextContent{Text: "b"}}, IsError: true}, nil
	}}
	if !d.starts() {
		t.Error("a decoded call may not start the server")
	}
	res, err := d.send(context.Background(), "echo", call.Request{Relay: relay, ProgressToken: "tok", Meta: map[string]any{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.tool != "echo" || got.args != `{"text":"hi"}` || got.token != "tok" || got.relay != relay || got.meta["k"] != "v" {
		t.Errorf("sent %+v", got)
	}
	if res.Text != "a\nb" || !res.IsError || res.Upstream == nil {
		t.Errorf("result %+v", res)
	}
	d.call = func(context.Context, string, json.RawMessage, map[string]any, any, upstream.Relay) (*mcp.CallToolResult, error) {
		return nil, errors.New("gone")
	}
	if _, err := d.send(context.Background(), "echo", call.Request{}); err == nil {
		t.Error("an error was lost")
	}
}

func TestAPooledCallWithoutAForwardIsDecoded(t *testing.T) {
	c := call.NewCall(call.Request{})
	if c.Req.Forward.On() {
		t.Fatal("no forward is on")
	}
	fwd := call.NewForwardCall(json.RawMessage(`{}`), nil, nil, nil)
	c.Req.Forward = fwd
	if !fwd.On() {
		t.Fatal("a forward is off")
	}
	fwd.Off()
	if fwd.On() || fwd.Answered() {
		t.Error("a forward turned off is still on")
	}
}
