//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// mcpMethods is every method pml's MCP server (the go-sdk's) handles, with
// a params object whose field has the wrong type for it.
var mcpMethods = []struct {
	method   string
	wrongArg string
}{
	{"initialize", `{"protocolVersion":5,"capabilities":[],"clientInfo":"x"}`},
	{"ping", `{"_meta":5}`},
	{"tools/list", `{"cursor":5}`},
	{"tools/call", `{"name":5,"arguments":"x"}`},
	{"resources/list", `{"cursor":{}}`},
	{"resources/templates/list", `{"cursor":[]}`},
	{"resources/read", `{"uri":5}`},
	{"resources/subscribe", `{"uri":true}`},
	{"resources/unsubscribe", `{"uri":null}`},
	{"prompts/list", `{"cursor":5}`},
	{"prompts/get", `{"name":5,"arguments":[]}`},
	{"logging/setLevel", `{"level":5}`},
	{"completion/complete", `{"ref":5,"argument":"x"}`},
	{"server/discover", `{"_meta":"x"}`},
	{"subscriptions/listen", `{"notifications":5}`},
	{"notifications/initialized", `{"_meta":5}`},
	{"notifications/cancelled", `{"requestId":{},"reason":5}`},
	{"notifications/roots/list_changed", `{"_meta":[]}`},
	{"notifications/progress", `{"progressToken":{},"progress":"x"}`},
}

// paramsForms are the shapes of params every method is sent with: the
// valid and the invalid alike must get an answer (or none, for a
// notification), never end pml.
var paramsForms = []struct {
	name   string
	params string // "" leaves params out
}{
	{"without params", ""},
	{"with params null", "null"},
	{"with params {}", "{}"},
	{"with params an array", "[1]"},
	{"with params a string", `"x"`},
	{"with params a number", "7"},
	{"with a field of the wrong type", "wrong"},
}

// rpcTransport sends raw frames to one pml session.
type rpcTransport interface {
	// ask sends a request and returns its answer.
	ask(t *testing.T, frame, id string) json.RawMessage
	// tell sends a notification, which gets no answer.
	tell(t *testing.T, frame string)
}

type stdioTransport struct{ s *rawSession }

func (x stdioTransport) ask(t *testing.T, frame, id string) json.RawMessage {
	t.Helper()
	x.s.send(t, frame)
	return x.s.await(t, id, 30*time.Second)
}

func (x stdioTransport) tell(t *testing.T, frame string) { t.Helper(); x.s.send(t, frame) }

type httpTransport struct {
	h      *rawHTTP
	stderr *syncBuffer
}

func (x httpTransport) ask(t *testing.T, frame, id string) json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, msgs, err := x.h.post(ctx, frame)
	for _, m := range msgs {
		if a, _ := proper(m, id); string(a.ID) == id {
			return m
		}
	}
	if resp != nil && resp.StatusCode == 400 && len(msgs) == 0 && err != nil {
		// The go-sdk's HTTP handler refuses a request it cannot read
		// (params missing where required) as a bad request, before
		// JSON-RPC: an answer too, though not a JSON-RPC one (the error
		// shapes of pml serve are issue 45's).
		return json.RawMessage(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32600,"message":%q}}`, id, err.Error()))
	}
	t.Fatalf("no answer to %s (%v): %q\npml serve's stderr:\n%s", id, err, msgs, tail(x.stderr.String()))
	return nil
}

func (x httpTransport) tell(t *testing.T, frame string) {
	t.Helper()
	resp, msgs, err := x.h.post(context.Background(), frame)
	if resp == nil {
		t.Fatalf("sending %s: %v\npml serve's stderr:\n%s", frame, err, tail(x.stderr.String()))
	}
	if (resp.StatusCode == 202 && len(msgs) == 0) || (resp.StatusCode == 400 && len(msgs) == 0) {
		// Accepted; or refused as a bad request before JSON-RPC (the
		// go-sdk's HTTP handler, for params it requires): no answer.
		return
	}
	// A notification pml cannot read may be refused as a bad request,
	// with a JSON-RPC error as its body; never answered as a call.
	for _, m := range msgs {
		var a rpcAnswer
		if json.Unmarshal(m, &a) != nil || a.Result != nil || (a.Error != nil && len(a.ID) > 0 && string(a.ID) != "null") {
			t.Errorf("a notification was answered (HTTP %d): %s", resp.StatusCode, m)
		}
	}
}

// Every MCP method pml serves, sent with params absent, null, {}, of the
// wrong type, or with a field of the wrong type, over stdio and over HTTP
// (pml serve), with telemetry off and on: each request gets a result or
// a proper JSON-RPC error, notifications get none, and pml still answers
// the ping and tools/list that follow. (A paramless ping ended pml serve;
// a paramless notifications/initialized ended pml stdio with telemetry
// on.)
func TestEveryMethodWithAnyParamsIsAnsweredAndPMLServesOn(t *testing.T) {
	for _, tel := range []struct {
		name string
		on   bool
	}{{"with telemetry off", false}, {"with telemetry on", true}} {
		t.Run(tel.name, func(t *testing.T) {
			var env []string
			if tel.on {
				env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlpSink(t), "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_METRIC_EXPORT_INTERVAL=50"}
			}
			t.Run("over stdio", func(t *testing.T) {
				ws := newWorkspace(t, allowAll)
				everyMethod(t, stdioTransport{startRaw(t, ws, env...)})
			})
			t.Run("over HTTP", func(t *testing.T) {
				ws := newWorkspace(t, allowAll)
				url, token, stderr := startServeBin(t, pmlBin, ws, env...)
				everyMethod(t, httpTransport{startRawHTTP(t, url, token), stderr})
			})
		})
	}
}

func everyMethod(t *testing.T, x rpcTransport) {
	n := 100
	next := func() string { n++; return fmt.Sprint(n) }
	for _, m := range mcpMethods {
		for _, f := range paramsForms {
			t.Run(m.method+" "+f.name, func(t *testing.T) {
				frame := `{"jsonrpc":"2.0",%s"method":"` + m.method + `"`
				switch f.params {
				case "":
				case "wrong":
					frame += `,"params":` + m.wrongArg
				default:
					frame += `,"params":` + f.params
				}
				frame += "}"
				if strings.HasPrefix(m.method, "notifications/") {
					x.tell(t, fmt.Sprintf(frame, ""))
				} else {
					id := next()
					msg := x.ask(t, fmt.Sprintf(frame, `"id":`+id+`,`), id)
					if _, ok := proper(msg, id); !ok {
						t.Errorf("not a result or a proper JSON-RPC error: %s", msg)
					}
				}
				for _, after := range []string{"ping", "tools/list"} {
					id := next()
					msg := x.ask(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"`+after+`"}`, id)
					if a, ok := proper(msg, id); !ok || a.Error != nil {
						t.Fatalf("%s afterwards: %s", after, msg)
					}
				}
			})
		}
	}
}
