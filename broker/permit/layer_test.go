package permit

import (
	"context"
	"errors"
	"testing"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/audit"
)

func TestPermitLayerStopsDeniedCallsOnly(t *testing.T) {
	perms := Permissions{Allow: []string{"a:*"}, Ask: []string{"q:*"}, Deny: []string{"d:*"}}
	for _, tc := range []struct {
		tool    string
		reached int
		want    call.Decision
	}{
		{"a:x", 1, call.Allow}, {"q:x", 1, call.Ask}, {"d:x", 0, call.Deny}, {"other:x", 1, call.Ask},
	} {
		next := &countingNext{}
		l := PermitLayer{Next: next, Rules: NewLivePermissions(perms, "test")}
		c := &call.Call{Tool: tc.tool}
		res := l.Call(context.Background(), c)
		if next.n != tc.reached || c.Decision != tc.want {
			t.Errorf("%s: reached %d, decision %v", tc.tool, next.n, c.Decision)
		}
		if tc.want == call.Deny {
			e, _ := c.Noted()
			if !errors.Is(res.Err(), call.ErrDenied) || e.Decision != audit.Denied || e.Pattern != "d:*" {
				t.Errorf("%s: %+v %+v", tc.tool, res, e)
			}
		}
	}
}

// countingNext is the rest of the path: it counts the calls that reach it.
type countingNext struct{ n int }

func (c *countingNext) Call(context.Context, *call.Call) call.Result {
	c.n++
	return call.Result{}
}
