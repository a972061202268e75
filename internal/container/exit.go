package container

import (
	"context"
	"sync"
)

// ExitWatch is the one record of a container's end that a Process answers
// Done, Exit and Wait from. A runtime creates one per container and calls
// Finish once it knows how the container ended (its single watcher);
// embedding *ExitWatch gives a Process those three methods.
type ExitWatch struct {
	once sync.Once
	done chan struct{}
	exit Exit
	err  error
}

// NewExitWatch returns the watch of a container that runs.
func NewExitWatch() *ExitWatch { return &ExitWatch{done: make(chan struct{})} }

// Finish records how the container ended and closes Done. Only the first
// call counts: the exit seen first is the exit.
func (w *ExitWatch) Finish(exit Exit, err error) {
	w.once.Do(func() {
		w.exit, w.err = exit, err
		close(w.done)
	})
}

// Done is closed by Finish.
func (w *ExitWatch) Done() <-chan struct{} { return w.done }

// Exit is what Finish recorded, or ErrRunning before it.
func (w *ExitWatch) Exit() (Exit, error) {
	select {
	case <-w.done:
		return w.exit, w.err
	default:
		return Exit{}, ErrRunning
	}
}

// Wait blocks until Finish or until ctx ends.
func (w *ExitWatch) Wait(ctx context.Context) (Exit, error) {
	select {
	case <-w.done:
		return w.exit, w.err
	case <-ctx.Done():
		return Exit{}, ctx.Err()
	}
}

// Exited reports whether p's Done is closed, without blocking.
func Exited(p Process) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}
