package container

import (
	"context"
	"slices"
	"sync"
)

// Standby containers (sandbox.standby): a pooled server's container
// created and started ahead of need, its in-container program waiting
// and the server's command not yet run, left by one pml session for the
// next session that starts a container of the identical spec. That
// session claims it (exactly one can) and checks its real configuration
// against the spec before the server runs in it: the engine's create
// and start, two thirds of a first answer, are then off its path.
// internal/docker makes and adopts them; here are the labels and the
// hooks the layers above call.

// Labels of a standby container.
const (
	// LabelStandby is the key of the spec a standby was made for
	// (internal/docker: a digest of everything the container is created
	// with). It finds candidates; it proves nothing: the adopting pml
	// checks the container's configuration itself.
	LabelStandby = "pml.standby"
)

// StandbyLeaver is a Process that can leave a standby container of its
// own spec behind for a later session (internal/docker's direct path).
type StandbyLeaver interface {
	// StandbyPlanned reports whether LeaveStandby would make one now.
	StandbyPlanned() bool
	// LeaveStandby makes, in the background, one standby container of
	// the process's spec, unless standbys are off, the spec may not
	// have one, or one was left already for it by this pml. release is
	// called when no standby was made (nil: nothing to call).
	LeaveStandby(release func())
}

// LeaveStandby asks p (a pooled server's container that has answered
// its first call) to leave a standby of its spec, where its runtime
// makes them.
func LeaveStandby(p Process) {
	if l, ok := p.(StandbyLeaver); ok {
		l.LeaveStandby(nil)
	}
}

// LeaveStandby takes a container slot for the standby (it counts
// against sandbox.max_containers while this pml runs, until a call of
// this pml needs the slot) and passes the request on; none is made when
// every slot is taken.
func (p *limitedProcess) LeaveStandby(release func()) {
	l, ok := p.Process.(StandbyLeaver)
	if !ok || !l.StandbyPlanned() || !p.l.slots.take() {
		if release != nil {
			release()
		}
		return
	}
	slot := &standbySlot{l: p.l}
	p.l.mu.Lock()
	p.l.standbys = append(p.l.standbys, slot)
	p.l.mu.Unlock()
	l.LeaveStandby(func() {
		slot.free()
		if release != nil {
			release()
		}
	})
}

// StandbyPlanned is the wrapped process's.
func (p *limitedProcess) StandbyPlanned() bool {
	l, ok := p.Process.(StandbyLeaver)
	return ok && l.StandbyPlanned()
}

// standbySlot is the container slot a standby holds.
type standbySlot struct {
	l    *Limited
	once sync.Once
}

// free gives the slot back, once.
func (s *standbySlot) free() {
	s.once.Do(func() {
		s.l.mu.Lock()
		s.l.standbys = slices.DeleteFunc(s.l.standbys, func(x *standbySlot) bool { return x == s })
		s.l.mu.Unlock()
		s.l.release()
	})
}

// freeStandby gives a standby's slot to a start waiting for one; it
// reports whether there was one. The standby stays for a later session:
// it is only no longer counted.
func (l *Limited) freeStandby() bool {
	l.mu.Lock()
	if len(l.standbys) == 0 {
		l.mu.Unlock()
		return false
	}
	s := l.standbys[len(l.standbys)-1]
	l.mu.Unlock()
	s.free()
	return true
}

// isStandby reports whether a container carries the standby label.
func isStandby(l map[string]string) bool { return l[LabelStandby] != "" }

// StandbyRemover is a runtime that can remove this host's standbys no
// pml has claimed (internal/docker).
type StandbyRemover interface {
	RemoveStandbys(ctx context.Context) (int, error)
}

// RemoveStandbys removes this host's unclaimed standby containers, where
// rt makes standbys (pml cleanup: a person who cleans up does not want a
// container left running for a later session); it returns how many.
func RemoveStandbys(ctx context.Context, rt Runtime) (int, error) {
	if r, ok := unwrap[StandbyRemover](rt); ok {
		return r.RemoveStandbys(ctx)
	}
	return 0, nil
}
