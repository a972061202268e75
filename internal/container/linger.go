package container

import (
	"context"
	"sync"
)

// The engine requests that a stopped call no longer waits for: a create
// whose answer may still land (the container it makes is removed then),
// and a removal that went on past DeadlineGrace. The call's deadline is a
// bound, so they run in the background; but a pml that exits right after
// its last call ends (pml stdio when the client closes, pml call) would
// leave behind what they had not finished. Close waits for them, within
// its own bound (WaitLingering).
var lingering struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n drops to 0; nil while n is 0
}

// Linger counts one such request until the returned func is called
// (once; later calls do nothing).
func Linger() (done func()) {
	lingering.mu.Lock()
	if lingering.n == 0 {
		lingering.zero = make(chan struct{})
	}
	lingering.n++
	lingering.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			lingering.mu.Lock()
			lingering.n--
			if lingering.n == 0 {
				close(lingering.zero)
				lingering.zero = nil
			}
			lingering.mu.Unlock()
		})
	}
}

// WaitLingering waits until no request counted by Linger is left, or ctx
// ends (its error then).
func WaitLingering(ctx context.Context) error {
	lingering.mu.Lock()
	zero := lingering.zero
	lingering.mu.Unlock()
	if zero == nil {
		return nil
	}
	select {
	case <-zero:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
