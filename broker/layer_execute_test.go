package broker

import (
	"context"
	"testing"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/audit"
)

func TestExecuteLayerNotesWhatRanAndHowItEnded(t *testing.T) {
	f := newFixture(t, "")
	for _, tc := range []struct {
		path, decision, status string
	}{
		{"a.txt", audit.Allowed, "ok"},
		{"missing.txt", audit.Allowed, "error"},
		{"../outside", audit.PathBlocked, "error"},
	} {
		c := &call.Call{Tool: "filesystem:read_file", Args: map[string]any{"path": tc.path}, Pattern: "p"}
		executeLayerOf(f.b).Call(context.Background(), c)
		e, ok := c.Noted()
		if !ok || e.Decision != tc.decision || e.ExitStatus != tc.status || e.Pattern != "p" {
			t.Errorf("%s: noted %+v", tc.path, e)
		}
	}
}
