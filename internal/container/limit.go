package container

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// ErrAtCap: every container slot of this pml was taken for as long as the
// call could wait (its context ended while it queued).
var ErrAtCap = errors.New("container cap reached")

// DefaultMaxContainers is the cap on containers one pml runs at once when
// sandbox.max_containers is not set: twice the CPUs, at least 4 (a
// pml:execute run holds one container while its inner calls need others).
func DefaultMaxContainers() int { return max(4, 2*runtime.NumCPU()) }

type noQueueKey struct{}

// WithoutQueue marks a start that must not wait for a slot: when every
// slot is taken it fails at once with ErrAtCap. The pool pre-starts this
// way, so a container that no call asked for yet never delays one that a
// call needs.
func WithoutQueue(ctx context.Context) context.Context {
	return context.WithValue(ctx, noQueueKey{}, true)
}

// Limited is a Runtime that runs at most N containers at once. Start takes
// a slot, waiting in line (FIFO) while all are taken, for as long as the
// caller's context allows: the wait is part of the call's timeout. The
// slot is given back when the container has exited (Wait returned) or has
// been removed, whichever comes first. Every container pml starts goes
// through one Limited (broker.New wraps the runtime), so the cap covers
// single-use tool containers, pre-started pool containers, pooled servers,
// dependency installs and Deno runs alike.
type Limited struct {
	Runtime
	n     int
	slots chan struct{}

	mu sync.Mutex
	// reclaim, when set, frees a slot held by a container no call is
	// using (a pre-started pool container); it reports whether it did.
	reclaim func() bool
	// idle is closed (and forgotten) by Idle: starts waiting for a slot
	// try reclaim again.
	idle chan struct{}
	// waiting counts the starts waiting for a slot.
	waiting int
	// used is set by the first Start, before anything reaches the engine.
	used atomic.Bool
}

// Limit wraps rt with a cap of n containers (n < 1: DefaultMaxContainers).
func Limit(rt Runtime, n int) *Limited {
	if n < 1 {
		n = DefaultMaxContainers()
	}
	return &Limited{Runtime: rt, n: n, slots: make(chan struct{}, n)}
}

// Cap is the number of containers that may run at once.
func (l *Limited) Cap() int { return l.n }

// Used reports whether a start was ever asked for: a pml that never asked
// has no container to sweep at its end (pml list with the engine down has
// nothing to warn about).
func (l *Limited) Used() bool { return l.used.Load() }

// Running is the number of slots taken now (tests, logs).
func (l *Limited) Running() int { return len(l.slots) }

// Waiting is the number of starts waiting for a slot now (tests, logs).
func (l *Limited) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting
}

// Idle says that a container no call uses now holds a slot (the pool
// calls it when a pre-start has become ready): the starts waiting for a
// slot try to reclaim it.
func (l *Limited) Idle() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.idle != nil {
		close(l.idle)
		l.idle = nil
	}
}

// SetReclaim registers the function that frees an idle container's slot
// when a start would otherwise wait.
func (l *Limited) SetReclaim(f func() bool) {
	l.mu.Lock()
	l.reclaim = f
	l.mu.Unlock()
}

// Start takes a slot, then starts the container.
func (l *Limited) Start(ctx context.Context, spec Spec, streams Streams) (Process, error) {
	l.used.Store(true)
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	p, err := l.Runtime.Start(ctx, spec, streams)
	if err != nil {
		l.release()
		return nil, err
	}
	lp := &limitedProcess{Process: p, l: l}
	// The slot is free once the container has exited, whoever looks.
	go func() {
		<-p.Done()
		lp.free()
	}()
	return lp, nil
}

func (l *Limited) acquire(ctx context.Context) error {
	select {
	case l.slots <- struct{}{}:
		return nil
	default:
	}
	if ctx.Value(noQueueKey{}) != nil {
		return fmt.Errorf("%w: all %d container slots are in use", ErrAtCap, l.n)
	}
	l.mu.Lock()
	l.waiting++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.waiting--
		l.mu.Unlock()
	}()
	began := time.Now()
	for {
		// A pre-started container nobody uses yet gives its slot to a
		// call: now, and again whenever one becomes ready while this call
		// waits (a pre-start that held a slot when the call came finishes
		// later, and would then hold it idle for as long as the call can
		// wait).
		l.mu.Lock()
		reclaim := l.reclaim
		if l.idle == nil {
			l.idle = make(chan struct{})
		}
		idle := l.idle
		l.mu.Unlock()
		if reclaim != nil {
			reclaim()
		}
		select {
		case l.slots <- struct{}{}:
			return nil
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("%w: all %d containers this pml may run at once were busy for %s, until the call's time ran out "+
				"(%v); retry with fewer calls at once, or raise sandbox.max_containers in .pml.json",
				ErrAtCap, l.n, time.Since(began).Round(time.Millisecond), ctx.Err())
		}
	}
}

func (l *Limited) release() { <-l.slots }

// limitedProcess gives its slot back once, when the container has exited
// or been removed. Wait and Remove free it themselves too, so that a caller
// that saw the exit finds the slot free already.
type limitedProcess struct {
	Process
	l    *Limited
	once sync.Once
}

func (p *limitedProcess) free() { p.once.Do(p.l.release) }

func (p *limitedProcess) Wait(ctx context.Context) (Exit, error) {
	e, err := p.Process.Wait(ctx)
	if err == nil {
		p.free()
	}
	return e, err
}

func (p *limitedProcess) Remove(ctx context.Context) error {
	err := p.Process.Remove(ctx)
	// Even a failed removal gives the slot back: the container is then
	// left to the final sweep, and holding its slot forever would shrink
	// the cap for the rest of the session.
	p.free()
	return err
}
