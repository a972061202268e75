package container

import "time"

// Hooks for the external tests (package container_test), which use the
// shared fake runtime (containertest imports this package).

// SetPoolClock replaces the pool's clock.
func SetPoolClock(p *Prestarted, now func() time.Time) { p.now = now }

// SpecKey is specKey.
func SpecKey(s Spec) string { return specKey(s) }

// HoldPool locks the pool and returns the first ready container of spec's
// kind; release unlocks it.
func HoldPool(p *Prestarted, spec Spec) (first Process, release func()) {
	p.mu.Lock()
	return p.kinds[specKey(spec)].ready[0], p.mu.Unlock
}

// SetRemovalRetries replaces the pauses between a pool's removal attempts
// until the test ends.
func SetRemovalRetries(t interface{ Cleanup(func()) }, d ...time.Duration) {
	old := removalRetries
	removalRetries = d
	t.Cleanup(func() { removalRetries = old })
}
