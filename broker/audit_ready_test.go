package broker

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/audit"
)

// A call whose audit entry cannot be written is refused before it runs:
// the client hears why, with the log's path and the fix, and the tool's
// effect is not there. Before, the call ran and only pml's log said the
// entry was lost.
func TestACallThatCannotBeAuditedDoesNotRun(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["filesystem:*"]}}`)
	logPath := filepath.Join(f.ws, ".pml", "audit.jsonl")
	if err := os.MkdirAll(logPath, 0o700); err != nil {
		t.Fatal(err)
	}
	res := f.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"})
	if !res.IsError || !errors.Is(res.Err(), call.ErrUnavailable) {
		t.Fatalf("the call was not refused: %+v", res)
	}
	for _, want := range []string{"did not run filesystem:write_file", logPath, "directory", "pml doctor"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("the refusal does not say %q: %s", want, res.Text)
		}
	}
	if _, err := os.Stat(filepath.Join(f.ws, "b.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused write ran: %v", err)
	}

	// Once the log is writable again, calls run and are recorded.
	if err := os.Remove(logPath); err != nil {
		t.Fatal(err)
	}
	if res := f.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"}); res.IsError {
		t.Fatalf("after the fix: %s", res.Text)
	}
	if got := auditEntries(t, f.ws); len(got) != 1 || got[0].Tool != "filesystem:write_file" || got[0].Decision != audit.Allowed {
		t.Errorf("entries after the fix: %+v", got)
	}
}

// An entry that could not be written after the call ran is told to the
// client with the result, whatever its form.
func TestAnEntryLostAfterTheCallIsToldWithTheResult(t *testing.T) {
	err := &audit.WriteError{Path: "/w/.pml/audit.jsonl", Err: errors.New("no space left on device")}
	plain := withAuditFailure(nil, call.Result{Text: "Wrote 1 bytes"}, err)
	if !strings.HasPrefix(plain.Text, "Wrote 1 bytes\n\n") || !strings.Contains(plain.Text, "audit entry could not be written") || !strings.Contains(plain.Text, "/w/.pml/audit.jsonl") {
		t.Errorf("plain: %q", plain.Text)
	}
	up := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "server says"}}}
	got := withAuditFailure(nil, call.Result{Upstream: up}, err)
	if len(up.Content) != 1 || len(got.Upstream.Content) != 2 {
		t.Fatalf("upstream: %d blocks, the server's result %d", len(got.Upstream.Content), len(up.Content))
	}
	raw := withAuditFailure(nil, call.Result{Raw: []byte(`{"content":[{"type":"text","text":"forwarded"}]}`)}, err)
	if raw.Upstream == nil || len(raw.Upstream.Content) != 2 {
		t.Errorf("raw: %+v", raw.Upstream)
	}
}

// Every call gives back the room it held for its entry, however it ends
// (ran, failed, denied), and calls in parallel each have their entry
// (issue 51): nothing stays held to refuse later calls.
func TestEveryCallGivesBackTheRoomOfItsEntry(t *testing.T) {
	f := newFixture(t, `{"permissions": {"allow": ["filesystem:read_file"], "deny": ["filesystem:write_file"]}}`)
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i % 3 {
			case 0:
				f.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
			case 1:
				f.call(t, "filesystem:read_file", map[string]any{"path": "missing.txt"})
			default:
				f.call(t, "filesystem:write_file", map[string]any{"path": "b.txt", "content": "x"})
			}
		}()
	}
	wg.Wait()
	if held := f.b.audit.Held(); held != 0 {
		t.Errorf("%d bytes still held after every call ended", held)
	}
	if got := auditEntries(t, f.ws); len(got) != 30 {
		t.Errorf("%d entries for 30 calls", len(got))
	}
}
