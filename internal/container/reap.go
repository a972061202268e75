package container

import (
	"context"
	"fmt"
	"time"
)

// ForeignAge is how old a stopped container of another host must be before
// this host removes it.
const ForeignAge = time.Hour

// Reap removes containers created by pml processes that are no longer
// running (a broker killed with SIGKILL cannot clean up after itself):
//
//   - an owner with this host's id (HostID: same machine, boot and pid
//     namespace) is judged by its pid and start time, so its orphans go at
//     once and a live owner's containers stay;
//   - an owner of another host id (another CI runner sharing the daemon,
//     even one with the same host name) cannot be judged from here: its
//     running containers are never touched, and only a stopped one older
//     than ForeignAge is removed (each container also has its own
//     deadline, so none runs forever);
//   - labels of older pml versions (no host id) are judged by the host
//     name, as those versions did.
//
// Containers without complete owner labels are left alone. It returns how
// many it removed.
func Reap(ctx context.Context, rt Runtime, self Owner) (int, error) {
	n, err := removeOwnedBy(ctx, rt, "orphaned ", orphaned(self, time.Now()))
	if nr, ok := networkReaperOf(rt); ok && err == nil {
		// Their networks once their containers are gone (pml's egress
		// container's: internal/docker/egressbox.go).
		nr.ReapNetworks(ctx, self)
	}
	return n, err
}

// NetworkReaper is a runtime whose pml processes make networks of their
// own (the egress container's), labelled as their containers are.
type NetworkReaper interface {
	// ReapNetworks removes the networks of pml processes of this host
	// that died.
	ReapNetworks(ctx context.Context, self Owner)
}

func networkReaperOf(rt Runtime) (NetworkReaper, bool) { return unwrap[NetworkReaper](rt) }

// orphaned is Reap's judgement of one container.
func orphaned(self Owner, now time.Time) func(Owner, Managed) bool {
	return func(o Owner, c Managed) bool {
		if isStandby(c.Labels) && (o.HostID == self.HostID || o.HostID == "" && o.Host == self.Host) {
			// A standby is meant to outlive its owner: a running one
			// ends by itself (unclaimed past its time, or when the pml
			// that claimed it is gone). One that does not run (it
			// expired, or its owner died between its create and its
			// start) goes, once its owner is gone.
			return !c.Running && o != self && !o.Alive()
		}
		switch {
		case o == self:
			return false
		case o.HostID == "":
			return o.Host == self.Host && !o.Alive()
		case o.HostID == self.HostID:
			return !o.Alive()
		default:
			return !c.Running && !c.Created.IsZero() && now.Sub(c.Created) > ForeignAge
		}
	}
}

// Orphans counts the containers Reap would remove now. A Reap that
// returns may leave some listed: another pml removing the same container
// at the same moment makes this one's removal fail ("removal already in
// progress") while the container still runs.
func Orphans(ctx context.Context, rt Runtime, self Owner) (int, error) {
	list, err := rt.ListManaged(ctx)
	if err != nil {
		return 0, err
	}
	is := orphaned(self, time.Now())
	n := 0
	for _, c := range list {
		if o, ok := OwnerFromLabels(c.Labels); ok && is(o, c) {
			n++
		}
	}
	return n, nil
}

// RemoveOwn removes every container self created that is still there: a
// last sweep when a broker closes, for containers whose removal failed
// during a call (the daemon was unreachable for a moment, say).
//
// A standby that runs is left (it is for the next session; it ends by
// itself): only a standby made and not started yet goes with its owner.
func RemoveOwn(ctx context.Context, rt Runtime, self Owner) (int, error) {
	return removeOwnedBy(ctx, rt, "", func(o Owner, c Managed) bool {
		return o == self && (!isStandby(c.Labels) || !c.Running)
	})
}

// removeOwnedBy removes the managed containers with complete owner
// labels that match; what is of no one is never touched.
func removeOwnedBy(ctx context.Context, rt Runtime, what string, match func(Owner, Managed) bool) (int, error) {
	list, err := rt.ListManaged(ctx)
	if err != nil {
		return 0, err
	}
	removed := 0
	var firstErr error
	for _, c := range list {
		o, ok := OwnerFromLabels(c.Labels)
		if !ok || !match(o, c) {
			continue
		}
		if err := rt.RemoveContainer(ctx, c.ID); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("removing %scontainer %s: %w", what, short(c.ID), err)
			}
			continue
		}
		removed++
	}
	return removed, firstErr
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
