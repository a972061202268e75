package broker

import (
	"context"
	"strings"
	"testing"

	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/toolpin"
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

// holdAll is pins under which every listed tool drifted.
type holdAll struct{}

func (holdAll) Check(kind, server string, defs []toolpin.Def) (map[string]*toolpin.Drift, error) {
	m := map[string]*toolpin.Drift{}
	for _, d := range defs {
		m[d.Name] = &toolpin.Drift{State: toolpin.Changed, Now: d, Digest: d.Digest()}
	}
	return m, nil
}

func (holdAll) Accept(toolpin.Def, string) error { return nil }

// A held tool runs nothing even where the pin layer did not see it held
// (its entry registered after that layer looked): the execute step
// refuses it, says how to accept it, and notes it denied.
func TestExecuteLayerRunsNoHeldTool(t *testing.T) {
	f := newFixture(t, "")
	ran := false
	exec := tl.ExecutorFunc(func(context.Context, *call.Call, toolbox.Tool, map[string]any) call.Result {
		ran = true
		return call.Result{}
	})
	f.b.srv.Table.SetPins(holdAll{}, nil, nil)
	f.b.srv.Table.Replace(nil, []toolbox.Tool{{Name: "srv:note", Description: "changed"}}, exec)
	c := &call.Call{Tool: "srv:note", Args: map[string]any{}, Pattern: "srv:*"}
	res := executeLayerOf(f.b).Call(context.Background(), c)
	if ran || !res.IsError {
		t.Fatalf("a held tool ran (%v) or answered no error: %+v", ran, res)
	}
	if s := res.Text; !strings.Contains(s, "pml holds srv:note") || !strings.Contains(s, "pml lock --accept srv:note") {
		t.Errorf("the refusal does not say it is held and how to accept: %s", s)
	}
	if e, ok := c.Noted(); !ok || e.Decision != audit.Denied || !strings.Contains(e.Reason, "held") {
		t.Errorf("noted %+v", e)
	}
}
