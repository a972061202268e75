package container_test

import (
	"context"
	"testing"

	. "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
)

func TestRemoveOwnTakesOnlyThisOwnersContainers(t *testing.T) {
	self := Owner{PID: 100, Start: 111, Host: "h"}
	other := Owner{PID: 200, Start: 222, Host: "h"}
	rt := &containertest.Runtime{Managed: []Managed{
		{ID: "mine-1", Labels: self.Labels()},
		{ID: "theirs", Labels: other.Labels()},
		{ID: "mine-2", Labels: self.Labels()},
		{ID: "unlabelled", Labels: map[string]string{LabelManaged: "true"}},
	}}
	n, err := RemoveOwn(context.Background(), rt, self)
	if err != nil || n != 2 {
		t.Fatalf("RemoveOwn = %d, %v; want 2", n, err)
	}
	if !rt.IsRemoved("mine-1") || !rt.IsRemoved("mine-2") || rt.IsRemoved("theirs") || rt.IsRemoved("unlabelled") {
		t.Errorf("removed %v", rt.Removed())
	}
}
