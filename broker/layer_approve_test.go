package broker

import (
	"context"
	"testing"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
)

func TestApproveLayerAsksForAskOnly(t *testing.T) {
	f := newFixture(t, "")
	for _, tc := range []struct {
		decision call.Decision
		reached  int
	}{{call.Allow, 1}, {call.Ask, 0}} {
		next := &fakeNext{}
		c := call.NewCall(call.Request{Tool: "filesystem:write_file", Workflows: f.wf})
		c.Args, c.Decision = map[string]any{"path": "x"}, tc.decision
		res := approveLayerOf(f.b, next).Call(context.Background(), c)
		if next.reached != tc.reached {
			t.Errorf("%v: reached %d", tc.decision, next.reached)
		}
		if tc.decision == call.Ask {
			if a := approvalOf(t, res); a.ApprovalType != workflow.ApprovalToolPermission {
				t.Errorf("approval %+v", a)
			}
		}
	}
}
