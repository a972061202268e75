//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

package upstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestNamedLogNamesAndBoundsAServersMessage(t *testing.T) {
	got := NamedLog("srv", &mcp.LoggingMessageParams{Level: "info", Data: "hi"})
	if got.Logger != "srv" || got.Data != "hi" || got.Level != "info" {
		t.Errorf("plain: %+v", got)
	}
	got = NamedLog("srv", &mcp.LoggingMessageParams{Level: "info", Logger: "db\x1b[2J\n\u0085x" + strings.Repeat("é", 200), Data: map[string]any{"k": 1}})
	if !strings.HasPrefix(got.Logger, "srv/db[2Jx") || len(got.Logger) > len("srv/")+maxLogger || strings.ContainsAny(got.Logger, "\x1b\n\u0085") {
		t.Errorf("logger: %q", got.Logger)
	}
	got = NamedLog("srv", &mcp.LoggingMessageParams{Level: "info", Data: strings.Repeat("é", MaxLogData)})
	b, _ := json.Marshal(got.Data)
	if s, ok := got.Data.(string); !ok || !strings.HasSuffix(s, "(pml: cut at 16 KiB)") || len(b) > MaxLogData+64 {
		t.Errorf("huge data: %d bytes", len(b))
	}
	if NamedLog("srv", nil) != nil {
		t.Error("nil params")
	}
}
