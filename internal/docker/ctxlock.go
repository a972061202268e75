package docker

import (
	"context"
	"sync"
)

// ctxLock is a mutex whose waiters give up when their context ends. The
// holder may be waiting for an engine that does not answer (bounded by its
// own context); a call with a nearer deadline must not queue behind it
// past that deadline. The zero value is unlocked.
type ctxLock struct {
	once sync.Once
	ch   chan struct{}
}

// lock takes the lock, or returns ctx's error once ctx ends first.
func (l *ctxLock) lock(ctx context.Context) error {
	l.once.Do(func() { l.ch = make(chan struct{}, 1) })
	select {
	case l.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return wrap("waiting for another request to the engine", ctx.Err())
	}
}

func (l *ctxLock) unlock() { <-l.ch }
