package container

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pml-dev/pml/internal/telemetry"
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
// a slot, waiting in line (first come, first served: slotQueue) while all
// are taken, for as long as the caller's context allows: the wait is part
// of the call's timeout, and a start whose context ends leaves the line at
// once, its error saying how long it waited and behind how many. The
// slot is given back when the container has exited (Wait returned) or has
// been removed, whichever comes first. Every container pml starts goes
// through one Limited (broker.New wraps the runtime), so the cap covers
// single-use tool containers, pre-started pool containers, pooled servers,
// dependency installs and Deno runs alike.
type Limited struct {
	Runtime
	n     int
	slots *slotQueue

	mu sync.Mutex
	// reclaim, when set, frees a slot held by a container no call is
	// using (a pre-started pool container); it reports whether it did.
	// reclaimMore are tried after it, in order (an idle pooled server:
	// AddReclaim).
	reclaim     func() bool
	reclaimMore []func() bool
	// waiters counts the starts waiting for a slot: Idle has no one to
	// tell while it is 0 (it is called after every pooled server's call).
	waiters atomic.Int32
	// idle is closed (and forgotten) by Idle: starts waiting for a slot
	// try reclaim again.
	idle chan struct{}
	// used is set by the first Start, before anything reaches the engine.
	used atomic.Bool
	// standbys free the slots standby containers hold (standby.go),
	// newest last.
	standbys []*standbySlot
}

// Limit wraps rt with a cap of n containers (n < 1: DefaultMaxContainers).
func Limit(rt Runtime, n int) *Limited {
	if n < 1 {
		n = DefaultMaxContainers()
	}
	return &Limited{Runtime: rt, n: n, slots: newSlotQueue(n)}
}

// Cap is the number of containers that may run at once.
func (l *Limited) Cap() int { return l.n }

// Used reports whether a start was ever asked for: a pml that never asked
// has no container to sweep at its end (pml list with the engine down has
// nothing to warn about).
func (l *Limited) Used() bool { return l.used.Load() }

// Running is the number of slots taken now (tests, logs).
func (l *Limited) Running() int {
	taken, _ := l.slots.counts()
	return taken
}

// Waiting is the number of starts waiting for a slot now (tests, logs).
func (l *Limited) Waiting() int {
	_, waiting := l.slots.counts()
	return waiting
}

// Idle says that a container no call uses now holds a slot (the pool
// calls it when a pre-start has become ready): the starts waiting for a
// slot try to reclaim it.
func (l *Limited) Idle() {
	if l.waiters.Load() == 0 {
		return
	}
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

// AddReclaim registers a further function that frees an idle
// container's slot, tried when the one SetReclaim registered freed none
// (broker/tools: a pooled server with no call in flight, which its next
// call starts again).
func (l *Limited) AddReclaim(f func() bool) {
	l.mu.Lock()
	l.reclaimMore = append(l.reclaimMore, f)
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

// acquire takes a slot, or waits in line for one for as long as ctx
// allows (see slotQueue: first come, first served).
func (l *Limited) acquire(ctx context.Context) error {
	if ctx.Value(noQueueKey{}) != nil {
		if l.slots.take() {
			return nil
		}
		return fmt.Errorf("%w: all %d container slots are in use", ErrAtCap, l.n)
	}
	began := time.Now()
	w := l.slots.join()
	if w == nil {
		telemetry.QueueWaited(0, telemetry.QueueSlot)
		return nil
	}
	telemetry.QueueDepth(1)
	defer telemetry.QueueDepth(-1)
	l.waiters.Add(1)
	defer l.waiters.Add(-1)
	for {
		// A pre-started container nobody uses yet gives its slot to a
		// call: now, and again whenever one becomes ready while this call
		// waits (a pre-start that held a slot when the call came finishes
		// later, and would then hold it idle for as long as the call can
		// wait). Failing that, a pooled server no call uses now
		// (AddReclaim), which would otherwise hold its slot until
		// sandbox.idle_timeout: a first tools/list of more servers than
		// slots waited for slots no one gave back. The slot it frees goes
		// to the head of the line, which may be another call: the line
		// stays in order.
		l.mu.Lock()
		reclaims := make([]func() bool, 0, 2+len(l.reclaimMore))
		// A standby this pml left for a later session is the first to
		// give its slot to a call of this one.
		reclaims = append(reclaims, l.freeStandby)
		if l.reclaim != nil {
			reclaims = append(reclaims, l.reclaim)
		}
		reclaims = append(reclaims, l.reclaimMore...)
		if l.idle == nil {
			l.idle = make(chan struct{})
		}
		idle := l.idle
		l.mu.Unlock()
		for _, reclaim := range reclaims {
			if reclaim() {
				break
			}
		}
		select {
		case <-w.granted:
			waited := time.Since(began)
			telemetry.QueueWaited(waited, telemetry.QueueSlot)
			if q := queueWaitOf(ctx); q != nil {
				q.add(waited, l.n+w.ahead, l.n)
			}
			return nil
		case <-idle:
		case <-ctx.Done():
			ahead := l.slots.leave(w)
			return l.gaveUp(ctx, time.Since(began), ahead)
		}
	}
}

// gaveUp is the error of a start whose context ended while it waited in
// line with ahead starts before it (and every slot taken).
func (l *Limited) gaveUp(ctx context.Context, waited time.Duration, ahead int) error {
	// Behind it: the containers holding every slot, and the starts
	// still ahead of it in the line.
	behind := plural(l.n+ahead, "call")
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		telemetry.QueueWaited(waited, telemetry.QueueDeadline)
		return fmt.Errorf("%w: waited %s in the queue behind %s (sandbox.max_containers %d) until the call's time ran out; "+
			"raise sandbox.max_containers in .pml.json, or make fewer calls in parallel", ErrAtCap, seconds(waited), behind, l.n)
	}
	telemetry.QueueWaited(waited, telemetry.QueueCancelled)
	return fmt.Errorf("%w: cancelled after it waited %s in the queue behind %s (sandbox.max_containers %d): %w",
		ErrAtCap, seconds(waited), behind, l.n, context.Cause(ctx))
}

// seconds says d in seconds, to the tenth under a minute.
func seconds(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.0f s", d.Seconds())
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func (l *Limited) release() { l.slots.release() }

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
