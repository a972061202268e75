package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/pml-dev/pml/internal/audit"
)

func TestPermitLayerStopsDeniedCallsOnly(t *testing.T) {
	perms := Permissions{Allow: []string{"a:*"}, Ask: []string{"q:*"}, Deny: []string{"d:*"}}
	for _, tc := range []struct {
		tool    string
		reached int
		want    Decision
	}{
		{"a:x", 1, Allow}, {"q:x", 1, Ask}, {"d:x", 0, Deny}, {"other:x", 1, Ask},
	} {
		next := &fakeNext{}
		l := PermitLayer{Next: next, Decide: perms.Decide, Source: func() string { return "test" }}
		c := &Call{Tool: tc.tool}
		res := l.Call(context.Background(), c)
		if next.reached != tc.reached || c.Decision != tc.want {
			t.Errorf("%s: reached %d, decision %v", tc.tool, next.reached, c.Decision)
		}
		if tc.want == Deny {
			e, _ := c.Noted()
			if !errors.Is(res.Err(), ErrDenied) || e.Decision != audit.Denied || e.Pattern != "d:*" {
				t.Errorf("%s: %+v %+v", tc.tool, res, e)
			}
		}
	}
}
