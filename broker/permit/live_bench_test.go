package permit

import "testing"

// BenchmarkLiveDecide: a call's permission, read twice per fast-path
// call (the fast path's own look, then the permit layer), with pml's
// default permissions.
func BenchmarkLiveDecide(b *testing.B) {
	l := NewLivePermissions(DefaultPermissions(), "test")
	for b.Loop() {
		l.Decide("memory:read_graph")
	}
}

// BenchmarkDecide: the same decided from the patterns every time.
func BenchmarkDecide(b *testing.B) {
	p := DefaultPermissions()
	for b.Loop() {
		p.Decide("memory:read_graph")
	}
}
