package container

import (
	"context"
	"testing"
)

func TestRemoveOwnTakesOnlyThisOwnersContainers(t *testing.T) {
	self := Owner{PID: 100, Start: 111, Host: "h"}
	other := Owner{PID: 200, Start: 222, Host: "h"}
	rt := &fakeRuntime{managed: []Managed{
		{ID: "mine-1", Labels: self.Labels()},
		{ID: "theirs", Labels: other.Labels()},
		{ID: "mine-2", Labels: self.Labels()},
		{ID: "unlabelled", Labels: map[string]string{LabelManaged: "true"}},
	}}
	n, err := RemoveOwn(context.Background(), rt, self)
	if err != nil || n != 2 {
		t.Fatalf("RemoveOwn = %d, %v; want 2", n, err)
	}
	if !rt.isRemoved("mine-1") || !rt.isRemoved("mine-2") || rt.isRemoved("theirs") || rt.isRemoved("unlabelled") {
		t.Errorf("removed %v", rt.removed)
	}
}
