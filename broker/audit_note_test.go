package broker

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/audit"
)

type fixedNote string

func (n fixedNote) AuditNote() string { return string(n) }

// Hostile: tools run on a runtime whose isolation is not verified (the
// Kubernetes opt-out) must say so in every audit entry, whatever the
// outcome, not only in a log line.
func TestARuntimeNoteIsInEveryAuditEntry(t *testing.T) {
	ws := t.TempDir()
	sink := audit.New(filepath.Join(ws, ".pml", "audit.jsonl"))
	next := call.HandlerFunc(func(_ context.Context, c *call.Call) call.Result {
		if c.Tool == "ok" {
			c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Allowed, ExitStatus: "ok"})
			return call.Result{}
		}
		return errorResult(call.ErrInvalidInput)
	})
	path := auditLayerNoted(auditLayer{next: next, log: zerolog.Nop(), sink: sink}, fixedNote("network NOT verified"))
	path.Call(context.Background(), call.NewCall(call.Request{Tool: "ok"}))
	path.Call(context.Background(), call.NewCall(call.Request{Tool: "bad"}))
	got := auditEntries(t, ws)
	if len(got) != 2 || got[0].Reason != "network NOT verified" || got[1].Reason != "invalid_input; network NOT verified" {
		t.Fatalf("entries %+v: want the note in each", got)
	}
}
