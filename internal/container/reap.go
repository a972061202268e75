package container

import (
	"context"
	"fmt"
)

// Reap removes containers created by pml processes on this host that are no
// longer running (a broker killed with SIGKILL cannot clean up after
// itself). Containers of live owners, of other hosts, or without complete
// owner labels are left alone. It returns how many it removed.
func Reap(ctx context.Context, rt Runtime, self Owner) (int, error) {
	return removeOwned(ctx, rt, "orphaned ", func(o Owner) bool {
		return o.Host == self.Host && o != self && !o.Alive()
	})
}

// RemoveOwn removes every container self created that is still there: a
// last sweep when a broker closes, for containers whose removal failed
// during a call (the daemon was unreachable for a moment, say).
func RemoveOwn(ctx context.Context, rt Runtime, self Owner) (int, error) {
	return removeOwned(ctx, rt, "", func(o Owner) bool { return o == self })
}

// removeOwned removes the managed containers with complete owner labels
// whose owner matches; what is of no one is never touched.
func removeOwned(ctx context.Context, rt Runtime, what string, match func(Owner) bool) (int, error) {
	list, err := rt.ListManaged(ctx)
	if err != nil {
		return 0, err
	}
	removed := 0
	var firstErr error
	for _, c := range list {
		o, ok := OwnerFromLabels(c.Labels)
		if !ok || !match(o) {
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
