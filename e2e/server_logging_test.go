//go:build linux

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// logInbox keeps the notifications/message a client got.
type logInbox struct {
	mu  sync.Mutex
	got []*mcp.LoggingMessageParams
}

func (l *logInbox) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.got = append(l.got, req.Params)
	}}
}

// wait returns the messages once there are n (or after a few seconds,
// what there is).
func (l *logInbox) wait(n int, within time.Duration) []*mcp.LoggingMessageParams {
	deadline := time.Now().Add(within)
	for {
		l.mu.Lock()
		got := append([]*mcp.LoggingMessageParams(nil), l.got...)
		l.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *logInbox) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = nil
}

// checkServerLogs drives the everything server's "log" tool (it logs
// "something happened!" at level error) through pml: nothing before the
// client sets a level, the message at "error" with the server named as
// logger, nothing at "critical".
func checkServerLogs(t *testing.T, cs *mcp.ClientSession, inbox *logInbox, logTool string) {
	t.Helper()
	ctx := context.Background()
	if ir := cs.InitializeResult(); ir == nil || ir.Capabilities == nil || ir.Capabilities.Logging == nil {
		t.Errorf("pml does not declare logging: %+v", ir)
	}
	if _, res := callC(t, cs, logTool, nil); res.IsError {
		t.Fatalf("%s: %s", logTool, text(res))
	}
	if got := inbox.wait(1, time.Second); len(got) != 0 {
		t.Errorf("log messages before the client set a level: %+v", got[0])
	}
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "error"}); err != nil {
		t.Fatal(err)
	}
	inbox.reset()
	if _, res := callC(t, cs, logTool, nil); res.IsError {
		t.Fatalf("%s: %s", logTool, text(res))
	}
	got := inbox.wait(1, 10*time.Second)
	if len(got) != 1 || got[0].Logger != "everything" || got[0].Level != "error" || got[0].Data != "something happened!" {
		t.Fatalf("at level error the client got %d messages (want one, from the logger \"everything\"): %s", len(got), logsJSON(got))
	}
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "critical"}); err != nil {
		t.Fatal(err)
	}
	inbox.reset()
	callC(t, cs, logTool, nil)
	if got := inbox.wait(1, time.Second); len(got) != 0 {
		t.Errorf("at level critical the client got an error message: %s", logsJSON(got))
	}
}

func logsJSON(got []*mcp.LoggingMessageParams) string {
	b, _ := json.Marshal(got)
	if len(b) > 600 {
		b = append(b[:600], "…"...)
	}
	return string(b)
}

// TestServerLogMessagesReachTheClient (issue 53): a server's
// notifications/message reach the client of pml stdio and pml serve as
// notifications/message named after the server, at the level the client
// set with logging/setLevel; pml declares logging.
func TestServerLogMessagesReachTheClient(t *testing.T) {
	needImage(t, everythingImage)
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "mcps": {"everything": {"image": %q}}}`, everythingImage))
	t.Run("stdio", func(t *testing.T) {
		for _, version := range []string{"2025-11-25", "2025-06-18"} {
			inbox := &logInbox{}
			client := mcp.NewClient(&mcp.Implementation{Name: "logs", Version: "1"}, inbox.options())
			cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: execPML(ws, "stdio")}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			checkServerLogs(t, cs, inbox, "everything__log")
		}
	})
	t.Run("serve", func(t *testing.T) {
		url, token := startServe(t, ws)
		inbox := &logInbox{}
		client := mcp.NewClient(&mcp.Implementation{Name: "logs", Version: "1"}, inbox.options())
		cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
			Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
		}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		checkServerLogs(t, cs, inbox, "everything__log")
	})
}

// TestHostileServerLogMessagesAreNamedAndBounded (issue 53): a server
// chooses its log messages' logger and data. One with terminal escapes
// and a newline in its logger, and one with 2 MiB of data, reach the
// client named after the server (probe/…), without control characters
// in the logger, the data cut to 16 KiB; pml's stdout stays the protocol
// (the session goes on).
func TestHostileServerLogMessagesAreNamedAndBounded(t *testing.T) {
	ws := newWorkspace(t, probeConfig(t, `, "workspace": "none", "env": {"PROBE_HOSTILE_RESULTS": "1"}`))
	inbox := &logInbox{}
	s := startSessionWith(t, pmlBin, ws, inbox.options())
	if err := s.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	if out, res := s.call(t, "probe__hostile", map[string]any{"mode": "log"}); res.IsError || out != "log answered" {
		t.Fatalf("hostile log: %q", out)
	}
	got := inbox.wait(2, 10*time.Second)
	if len(got) != 2 {
		t.Fatalf("the client got %d log messages, want 2: %s\n%s", len(got), logsJSON(got), s.stderr.String())
	}
	for _, m := range got {
		if !strings.HasPrefix(m.Logger, "probe/") || strings.IndexFunc(m.Logger, unicode.IsControl) >= 0 {
			t.Errorf("logger %q: not named after the server, or with control characters", m.Logger)
		}
		b, _ := json.Marshal(m.Data)
		if len(b) > 17<<10 {
			t.Errorf("logger %q: %d bytes of data reached the client", m.Logger, len(b))
		}
	}
	if got[0].Logger != "probe/evil[2Jname" {
		t.Errorf("the escaped logger: %q", got[0].Logger)
	}
	if d, _ := got[1].Data.(string); !strings.HasSuffix(d, "(pml: cut at 16 KiB)") {
		t.Errorf("the huge data is not cut: %.200v", got[1].Data)
	}
	if out, res := s.call(t, "probe__echo", map[string]any{"text": "still here"}); res.IsError || !strings.Contains(out, "still here") {
		t.Errorf("the session did not go on: %q", out)
	}
}
