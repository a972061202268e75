package broker

import (
	"context"
	"testing"

	"github.com/pml-dev/pml/broker/call"
)

func TestApproveLayerAsksForAskOnly(t *testing.T) {
	f := newFixture(t, "")
	for _, tc := range []struct {
		decision Decision
		reached  int
	}{{Allow, 1}, {Ask, 0}} {
		next := &fakeNext{}
		c := call.NewCall(Request{Tool: "filesystem:write_file", Workflows: f.wf})
		c.Args, c.Decision = map[string]any{"path": "x"}, tc.decision
		res := approveLayerOf(f.b, next).Call(context.Background(), c)
		if next.reached != tc.reached {
			t.Errorf("%v: reached %d", tc.decision, next.reached)
		}
		if tc.decision == Ask {
			if a := approvalOf(t, res); a.ApprovalType != ApprovalToolPermission {
				t.Errorf("approval %+v", a)
			}
		}
	}
}
