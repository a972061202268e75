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

func TestStandbysOutliveTheirOwnerOnlyWhileTheyRun(t *testing.T) {
	self := Self()
	dead := Owner{PID: 1 << 22, Start: 1, Host: self.Host, HostID: self.HostID} // no such pid
	foreign := Owner{PID: 5, Start: 5, Host: "h", HostID: "another-host"}
	standby := func(o Owner) map[string]string {
		l := o.Labels()
		l[LabelStandby] = "k"
		return l
	}
	rt := &containertest.Runtime{Managed: []Managed{
		{ID: "mine-running", Labels: standby(self), Running: true},
		{ID: "mine-created", Labels: standby(self)},
		{ID: "dead-running", Labels: standby(dead), Running: true},
		{ID: "dead-exited", Labels: standby(dead)},
		{ID: "foreign-running", Labels: standby(foreign), Running: true},
		{ID: "dead-plain", Labels: dead.Labels(), Running: true},
	}}
	if _, err := Reap(context.Background(), rt, self); err != nil {
		t.Fatal(err)
	}
	for id, gone := range map[string]bool{"mine-running": false, "mine-created": false, "dead-running": false, "dead-exited": true, "foreign-running": false, "dead-plain": true} {
		if rt.IsRemoved(id) != gone {
			t.Errorf("Reap: %s removed %v, want %v", id, rt.IsRemoved(id), gone)
		}
	}
	// A pml closing leaves its running standby, and takes one it made
	// but did not start.
	if _, err := RemoveOwn(context.Background(), rt, self); err != nil {
		t.Fatal(err)
	}
	if rt.IsRemoved("mine-running") || !rt.IsRemoved("mine-created") {
		t.Errorf("RemoveOwn removed %v", rt.Removed())
	}
}
