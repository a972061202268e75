package upstream

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"
)

// TestTheSDKClientLogsToPMLsLog: the go-sdk client's own warnings about a
// server (a tool it drops for an invalid name) are pml's log lines with
// their level and the server's name; before, the client had no logger
// and they were discarded.
func TestTheSDKClientLogsToPMLsLog(t *testing.T) {
	var b bytes.Buffer
	s := New(Options{Name: "srv", Logger: zerolog.New(&b)})
	for _, oneShot := range []bool{true, false} {
		b.Reset()
		opts := s.clientOptions(oneShot, nil)
		if opts.Logger == nil {
			t.Fatalf("oneShot %v: the client has no logger", oneShot)
		}
		opts.Logger.Warn("dropping tool", "tool", "bad name!")
		var line map[string]any
		if err := json.Unmarshal(b.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON line: %q", b.String())
		}
		if line["level"] != "warn" || line["server"] != "srv" || line["from"] != "mcp-sdk" || line["tool"] != "bad name!" || line["message"] != "dropping tool" {
			t.Errorf("oneShot %v: %v", oneShot, line)
		}
	}
}
