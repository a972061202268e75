package container

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// DeadlineGrace is how long a call whose deadline passed (or whose caller
// cancelled it) waits for the engine to confirm that its container was
// killed and removed. A deadline is a bound on the call whatever the
// engine does: a frozen or gone engine must not hold the caller for
// CleanupTimeout. What the engine has not confirmed by then goes on being
// removed in the background (removeConfirmed), and whatever is
// still left is reaped by the next pml start (Reap: its owner is gone).
const DeadlineGrace = 500 * time.Millisecond

// GraceContext is the context for the cleanup a stopped call waits for:
// ctx's values without its cancellation, ending DeadlineGrace from now.
func GraceContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(context.WithoutCancel(ctx), DeadlineGrace)
}

// Disposal is what became of a call's container once the call was
// stopped (its deadline passed, or its caller cancelled it), as far as the
// engine confirmed it: messages say exactly this, never more.
type Disposal struct {
	// Container is the container's id once the engine created it; before
	// that the name the engine was asked to create it under ("" when
	// nothing was asked of the engine yet).
	Container string
	// Created: the engine had confirmed the container's creation.
	Created bool
	// Removed: the engine confirmed that the container was killed and
	// removed.
	Removed bool
	// Waited is how long pml waited for that confirmation.
	Waited time.Duration
}

// String says what became of the container, for a person.
func (d Disposal) String() string {
	switch {
	case d.Container == "":
		return "no container had been created yet"
	case !d.Created:
		return fmt.Sprintf("no container had been created yet (the engine had not answered pml's request to create %s; should it still create it, the next pml start removes it, or run pml cleanup)", d.Container)
	case d.Removed:
		return "the container was killed and removed"
	}
	return fmt.Sprintf("the engine did not answer within %s: container %s may still be running; the next pml start removes it (or run pml cleanup)", d.Waited.Round(100*time.Millisecond), short(d.Container))
}

// StartStopped is the error of a Start whose context ended before the
// container was running: it says what became of the container Start had
// asked for (Start never returns one, the contract says; this says
// whether the engine confirmed that). It unwraps to the context's error.
type StartStopped struct {
	Disposal
	Err error
}

func (e *StartStopped) Error() string {
	return fmt.Sprintf("the container was not started (%v): %s", e.Err, e.Disposal)
}

func (e *StartStopped) Unwrap() error { return e.Err }

// RemoveWithin removes p for a stopped call, waiting at most
// DeadlineGrace for the engine, and reports what the engine confirmed,
// with the exit when it was seen in time (else the zero Exit). When the
// engine does not confirm in time, the removal goes on in the background
// (each request bounded by CleanupTimeout, asked again while the engine
// has not removed it: removeConfirmed) and calls done once over;
// otherwise done is called before RemoveWithin returns.
//
// The one request is the removal (it kills what still runs, the Process
// contract), never a kill first: the engine finishes a removal it was
// asked for whatever becomes of pml, and a client that stops pml may
// SIGKILL it milliseconds after SIGTERM (codex: about 30 ms). A kill,
// then a wait for the exit, then the removal left the container killed
// (exited 137) and never removed when pml died in between.
func RemoveWithin(ctx context.Context, p Process, done func()) (Disposal, Exit) {
	return removeWithin(ctx, p, zerolog.Nop(), "removing a stopped call's container", done)
}

// removeWithin is RemoveWithin whose background removal logs to log, its
// lines naming the removal what (removeConfirmed).
func removeWithin(ctx context.Context, p Process, log zerolog.Logger, what string, done func()) (Disposal, Exit) {
	began := time.Now()
	d := Disposal{Container: p.ID(), Created: true}
	finished := make(chan error, 1)
	lingered := Linger()
	go func() {
		defer lingered()
		// The longer bound: this goroutine goes on after the grace ends,
		// asking again while the engine has not removed the container.
		err := removeConfirmed(ctx, p, log, what)
		if done != nil {
			done()
		}
		finished <- err
	}()
	t := time.NewTimer(DeadlineGrace)
	defer t.Stop()
	var exit Exit
	select {
	case err := <-finished:
		d.Removed = err == nil
		// How the container ended is part of the answer (137): the
		// watch saw the exit the removal caused (its code, even when the
		// watch then ended with the removal), unless the removal outran
		// it.
		if e, err := p.Exit(); err == nil || e.Code != 0 {
			exit = e
		}
	case <-t.C:
	}
	d.Waited = time.Since(began)
	return d, exit
}
