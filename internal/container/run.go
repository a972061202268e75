package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Result is the outcome of Run.
type Result struct {
	Stdout, Stderr []byte
	Exit           Exit
	// Truncated: the output passed the limit; the container was stopped and
	// the output cut.
	Truncated bool
	// TimedOut: the call's deadline passed and the container was killed.
	TimedOut bool
	// Cancelled: the caller cancelled and the container was killed.
	Cancelled bool
	// Answered: the call asked for one answer line (Request.AnswerLine)
	// and ended when it was complete; the container's exit was not waited
	// for, so Exit is zero.
	Answered bool
	// Warm: the container came pre-started from a Pool.
	Warm     bool
	Duration time.Duration
	// Disposal, set when the call was stopped (TimedOut, Cancelled, or a
	// start its context ended), says what became of the container as far
	// as the engine confirmed within DeadlineGrace.
	Disposal *Disposal
}

// Request is one use of a single-use container.
type Request struct {
	// Stdin is written to the container, then its stdin is closed.
	Stdin []byte
	// Limit caps stdout and stderr together, in bytes (0: no cap).
	Limit int64
	// AnswerLine: the container answers with one line on stdout (the
	// toolbox agent does). The call ends as soon as that line is complete
	// instead of when the container exits: Docker reports an exit tens of
	// milliseconds after it happened, longer than a warm call takes. When
	// no complete line comes, the exit (and an OOM kill) is reported as
	// usual.
	AnswerLine bool
	// Disposed, when set, is called once the container is gone (killed
	// and removed, or its removal given up): whatever it could write, it
	// has written.
	Disposed func()
}

// Run starts spec, writes stdin, collects output up to limit bytes
// (stdout and stderr together), and removes the container when done,
// whatever happens. When ctx ends the container is killed; Result says
// whether that was a timeout or a cancellation.
func Run(ctx context.Context, rt Runtime, spec Spec, stdin []byte, limit int64) (Result, error) {
	began := time.Now()
	out := newCapped(limit, false)
	p, err := rt.Start(ctx, spec, out.streams())
	if err != nil {
		return stoppedStart(err), err
	}
	res, err := collect(ctx, p, out, stdin, began)
	if res.TimedOut || res.Cancelled {
		// The caller's bound holds: wait DeadlineGrace at most for the
		// engine, the rest of the removal goes on in the background.
		d, exit := RemoveWithin(ctx, p, nil)
		res.Disposal, res.Exit = &d, exit
		res.Duration = time.Since(began)
		return res, err
	}
	// Remove even when ctx is already done: a fresh context bounded in time.
	rctx, cancel := CleanupContext(ctx)
	defer cancel()
	_ = p.Remove(rctx)
	return res, err
}

// stoppedStart is the Result of a Start that failed: when its context
// ended, what became of the container it asked for.
func stoppedStart(err error) Result {
	var ss *StartStopped
	if errors.As(err, &ss) {
		d := ss.Disposal
		return Result{Disposal: &d}
	}
	return Result{}
}

// collect writes stdin to a started container and gathers what it answers:
// until it exits, its output passes the limit (it is killed), ctx ends (it
// is killed) or, when out watches for one, its answer line is complete. It
// is the part of a call that Run and Pool.Run share; neither removes the
// container here.
func collect(ctx context.Context, p Process, out *capped, stdin []byte, began time.Time) (Result, error) {
	in := p.Stdin()
	// Written beside the wait: an engine that stops reading (frozen) must
	// not hold the call past its deadline. Removing the container closes
	// the stream and ends a write still blocked.
	go func() {
		if len(stdin) > 0 {
			// A write error means the process exited before reading: its
			// exit (below) tells why, so the error itself adds nothing.
			_, _ = in.Write(stdin)
		}
		_ = in.Close()
	}()

	var err error
	res := Result{}
	select {
	case <-p.Done():
		res.Exit, err = p.Exit()
		// The answer and the exit can come together (stdin is written
		// beside this wait): the answer is what the call waited for.
		select {
		case <-out.answered:
			res.Answered = true
		default:
		}
	case <-out.answered:
		res.Answered = true
	case <-out.full:
		res.Truncated = true
		res.Exit, err = killAndWait(ctx, p)
	case <-ctx.Done():
		// The caller removes the container within DeadlineGrace
		// (RemoveWithin): a kill and a wait here would be two more
		// requests an engine that does not answer could hold.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			res.TimedOut = true
		} else {
			res.Cancelled = true
		}
	}
	res.Stdout, res.Stderr = out.bytes()
	if out.truncated() {
		res.Truncated = true
	}
	res.Duration = time.Since(began)
	if err != nil {
		return res, fmt.Errorf("waiting for container: %w", err)
	}
	return res, nil
}

// killAndWait kills p and waits for its exit, both bounded by
// CleanupTimeout and by ctx's deadline plus DeadlineGrace: an engine that
// does not answer gives up the wait (the caller's Remove, with its own
// deadline, comes next), and never holds the call past its bound.
func killAndWait(ctx context.Context, p Process) (Exit, error) {
	cctx, cancel := CleanupContext(ctx)
	defer cancel()
	if dl, ok := ctx.Deadline(); ok {
		var cancelGrace context.CancelFunc
		cctx, cancelGrace = context.WithDeadline(cctx, dl.Add(DeadlineGrace))
		defer cancelGrace()
	}
	_ = p.Kill(cctx)
	return p.Wait(cctx)
}

// capped collects two streams up to a shared byte limit. Past the limit it
// keeps accepting (so the runtime's copier never blocks) but drops the data
// and signals full once. With watchLine it also signals answered once the
// kept stdout holds a complete line.
type capped struct {
	mu       sync.Mutex
	limit    int64
	n        int64
	bufs     [2]bytes.Buffer
	cut      bool
	full     chan struct{}
	fullOnce sync.Once

	watchLine  bool
	answered   chan struct{} // nil (never ready) unless watchLine
	answerOnce sync.Once
}

func newCapped(limit int64, watchLine bool) *capped {
	c := &capped{limit: limit, full: make(chan struct{}), watchLine: watchLine}
	if watchLine {
		c.answered = make(chan struct{})
	}
	return c
}

func (c *capped) streams() Streams { return Streams{Stdout: c.stream(0), Stderr: c.stream(1)} }

func (c *capped) stream(i int) *cappedStream { return &cappedStream{c: c, i: i} }

type cappedStream struct {
	c *capped
	i int
}

func (s *cappedStream) Write(p []byte) (int, error) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.limit - c.n
	if c.limit <= 0 {
		room = int64(len(p))
	}
	kept := p
	if int64(len(p)) > room {
		kept = p[:max(room, 0)]
		c.cut = true
		c.fullOnce.Do(func() { close(c.full) })
	}
	c.bufs[s.i].Write(kept)
	c.n += int64(len(kept))
	if s.i == 0 && c.watchLine && bytes.IndexByte(kept, '\n') >= 0 {
		c.answerOnce.Do(func() { close(c.answered) })
	}
	return len(p), nil
}

func (c *capped) bytes() ([]byte, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.bufs[0].Bytes()), bytes.Clone(c.bufs[1].Bytes())
}

func (c *capped) truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut
}
