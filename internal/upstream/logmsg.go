//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server's notifications/message reach pml's client (issue 53). What a
// server puts in one is its own choice, so pml names it and bounds it
// before it goes on: the logger is always the server's name (with the
// server's own logger after a '/'), control characters in the logger are
// dropped, and data larger than MaxLogData is replaced by its first bytes
// as a string, marked cut.

// MaxLogData bounds the JSON of one log message's data as it reaches the
// client.
const MaxLogData = 16 << 10

// maxLogger bounds the server's own logger name.
const maxLogger = 128

// forwardLevel is the level pml asks every server that declares logging
// for: all of it. Each client session gets what its own logging/setLevel
// asks for (the SDK's ServerSession.Log filters), so one pooled server
// can serve clients that want different levels.
const forwardLevel mcp.LoggingLevel = "debug"

// askForLogs asks a server that declares logging for its messages at
// forwardLevel: without a setLevel an SDK server sends none. A server that
// refuses only keeps its messages to itself.
func (s *Server) askForLogs(ctx context.Context, cs *mcp.ClientSession) {
	ir := cs.InitializeResult()
	if ir == nil || ir.Capabilities == nil || ir.Capabilities.Logging == nil {
		return
	}
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: forwardLevel}); err != nil {
		s.o.Logger.Debug().Err(err).Str("server", s.o.Name).Msg("the server refused logging/setLevel; its log messages are not passed on")
	}
}

// logTo passes a log message the tap took (forward.go) to r, the caller
// whose call it came during (none: it goes nowhere, as without pml a
// message to a client that set no level does).
func (s *Server) logTo(r Relay, params []byte) {
	if r == nil {
		return
	}
	var p mcp.LoggingMessageParams
	if json.Unmarshal(params, &p) != nil {
		return
	}
	r.Log(context.Background(), NamedLog(s.o.Name, &p))
}

// NamedLog is the log message p of the server name as pml passes it on:
// logger "name" or "name/logger", bounded and without control characters.
func NamedLog(name string, p *mcp.LoggingMessageParams) *mcp.LoggingMessageParams {
	if p == nil {
		return nil
	}
	out := &mcp.LoggingMessageParams{Level: p.Level, Logger: name, Data: p.Data}
	if own := cleanLogger(p.Logger); own != "" {
		out.Logger = name + "/" + own
	}
	if b, err := json.Marshal(p.Data); err != nil {
		out.Data = "(pml: the server's log data is not JSON)"
	} else if len(b) > MaxLogData {
		cut := b[:MaxLogData]
		for len(cut) > 0 && !utf8.Valid(cut) {
			cut = cut[:len(cut)-1]
		}
		out.Data = string(cut) + "… (pml: cut at 16 KiB)"
	}
	return out
}

func cleanLogger(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return -1
		}
		return r
	}, s)
	if len(s) > maxLogger {
		s = s[:maxLogger]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}
