package execute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/upstream"
)

// Event is what Next returns: a Call or a Done.
type Event interface{ event() }

// Call is one mcp.<namespace>.<action>(args) of the code, waiting for Reply
// or Fail.
type Call struct {
	ID   int64
	Tool string // "namespace:action"
	Args map[string]any
}

// Done is the end of the code: its result, or the error it ended with.
type Done struct {
	Status       string          // "success" or "error"
	Result       json.RawMessage // the returned value as JSON; "null" when none
	Error        string          // with Status "error": what the code threw
	ToolFailures []ToolFailure
}

// ToolFailure is a call that was answered with an error (isError or Fail).
type ToolFailure struct {
	Tool  string `json:"tool"`
	Error string `json:"error"`
}

func (Call) event() {}
func (Done) event() {}

// Error kinds, for errors.Is.
var (
	// ErrFinished: the run already delivered its Done.
	ErrFinished = errors.New("the run has finished")
	// ErrKilled: Kill stopped the run (the caller cancelled).
	ErrKilled = errors.New("the run was stopped before the code finished (cancelled)")
	// ErrTimeout: the run passed its time limit and was stopped.
	ErrTimeout = errors.New("the code did not finish in time")
	// ErrOutputLimit: the code wrote more than the policy's output limit.
	ErrOutputLimit = errors.New("the code wrote more output than allowed")
	// ErrExited: the container ended before the code finished.
	ErrExited = errors.New("the code's container exited before the code finished")
	// ErrOutOfMemory: with ErrExited, the code used more memory than the
	// policy allows.
	ErrOutOfMemory = errors.New("the code ran out of memory")
)

// maxLine bounds one protocol message when the policy sets no output limit:
// a line is buffered whole before it is parsed.
const maxLine = 64 << 20

// Run is one running program. Next, Reply, Fail and Kill are safe for
// concurrent use.
type Run struct {
	limit   int64
	timeout time.Duration
	heapMiB int64 // V8's heap limit, for error messages
	stderr  *upstream.Ring

	mu       sync.Mutex
	proc     container.Process
	queue    []Event
	pending  map[int64]bool // calls delivered or queued, not yet answered
	changed  chan struct{}  // closed (and replaced) at every state change
	doneSeen bool           // the runner sent pml/done
	doneOut  bool           // Next returned the Done
	err      error          // why the run ended, when it ended without Done
	written  int64          // bytes of stdout+stderr so far
	timer    *time.Timer

	// The compute budget: a clock that runs while the code may run and
	// stops while it waits for a person (Pause). 0: no budget, only the
	// wall-clock timeout.
	budget      time.Duration
	used        time.Duration // budget spent before the current stretch
	since       time.Time     // start of the current unpaused stretch
	paused      int           // Pause calls not yet matched by Resume
	budgetTimer *time.Timer

	stdinMu sync.Mutex

	cleanOnce sync.Once
	removed   chan struct{}
}

func newRun(limit int64, timeout time.Duration) *Run {
	return &Run{
		limit:   limit,
		timeout: timeout,
		stderr:  upstream.NewRing(64, 16<<10),
		pending: map[int64]bool{},
		changed: make(chan struct{}),
		removed: make(chan struct{}),
	}
}

// started attaches the container and starts the clocks.
func (r *Run) started(p container.Process) {
	r.mu.Lock()
	r.proc = p
	r.timer = time.AfterFunc(r.timeout, func() {
		r.end(fmt.Errorf("%w: it ran for %s, the limit (sandbox.timeout); its container was stopped", ErrTimeout, r.timeout))
	})
	if r.budget > 0 {
		r.since = time.Now()
		r.budgetTimer = time.AfterFunc(r.budget, r.overBudget)
	}
	ended := r.doneSeen || r.err != nil
	r.mu.Unlock()
	go func() {
		<-p.Done() // the runtime's one watch of the container
		exit, err := p.Exit()
		if err != nil {
			r.end(fmt.Errorf("%w: waiting for it failed: %v", ErrExited, err))
			return
		}
		r.end(r.exitError(exit))
	}()
	if ended {
		r.cleanup()
	}
}

// Pause stops the run's compute clock while it waits for a person (an
// approval of one of its calls): that wait does not count against the
// budget. Pauses nest; each must be matched by a Resume. The code itself
// keeps running, so the wall-clock timeout still bounds a paused run.
func (r *Run) Pause() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.budget <= 0 {
		return
	}
	r.paused++
	if r.paused == 1 && r.budgetTimer != nil {
		r.budgetTimer.Stop()
		r.used += time.Since(r.since)
	}
}

// Resume restarts the compute clock stopped by Pause.
func (r *Run) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.budget <= 0 || r.paused == 0 {
		return
	}
	r.paused--
	if r.paused == 0 && r.budgetTimer != nil {
		r.since = time.Now()
		r.budgetTimer.Reset(max(r.budget-r.used, 0))
	}
}

// overBudget ends a run whose compute clock reached the budget.
func (r *Run) overBudget() {
	r.mu.Lock()
	spent := r.used
	if r.paused == 0 {
		spent += time.Since(r.since)
	}
	// A timer that fired while Pause stopped it (or before a Resume reset
	// it) is stale: only a clock that really reached the budget ends the run.
	stale := r.paused > 0 || spent < r.budget
	r.mu.Unlock()
	if stale {
		return
	}
	r.end(fmt.Errorf("%w: it ran for %s not counting time spent waiting for approvals, the limit (sandbox.timeout); its container was stopped", ErrTimeout, r.budget))
}

// ContainerID is the id of the run's container.
func (r *Run) ContainerID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return ""
	}
	return r.proc.ID()
}

// Stderr returns the last n lines the code wrote to stderr (its console
// output) and any stray stdout lines.
func (r *Run) Stderr(n int) string { return r.stderr.Tail(n) }

func (r *Run) exitError(e container.Exit) error {
	// V8 reports its heap limit on stderr, followed by a C stack trace that
	// says nothing to the author of the code: name the limit instead.
	if strings.Contains(r.stderr.Tail(64), "Reached heap limit") {
		return &exitError{oom: true, msg: fmt.Sprintf("%v: the code ran out of memory (V8's heap limit of %d MiB, three quarters of sandbox.memory, was reached; exit code %d)", ErrExited, r.heapMiB, e.Code)}
	}
	msg := fmt.Sprintf("%v (exit code %d", ErrExited, e.Code)
	if e.OOMKilled {
		msg += ", killed for using more memory than the limit (sandbox.memory)"
	}
	msg += ")"
	if tail := r.stderr.Tail(10); tail != "" {
		msg += "; its last stderr lines:\n" + tail
	}
	return &exitError{msg: msg, oom: e.OOMKilled}
}

type exitError struct {
	msg string
	oom bool
}

func (e *exitError) Error() string { return e.msg }
func (e *exitError) Is(t error) bool {
	return t == ErrExited || (e.oom && t == ErrOutOfMemory)
}

// Next returns the next event: a Call to answer or the Done. It waits
// while the code runs (or waits itself) and returns ctx.Err() when ctx
// ends first; that does not stop the run. After the Done it returns
// ErrFinished. A run that ended otherwise (timeout, Kill, output limit,
// the container died) returns that error, naming the exit code and the
// last stderr lines where there are some; calls not yet returned by Next
// are then dropped, since they can no longer be answered.
func (r *Run) Next(ctx context.Context) (Event, error) {
	for {
		r.mu.Lock()
		if r.err != nil && !r.doneSeen {
			err := r.err
			r.mu.Unlock()
			return nil, err
		}
		if len(r.queue) > 0 {
			ev := r.queue[0]
			r.queue[0] = nil
			r.queue = r.queue[1:]
			if _, ok := ev.(Done); ok {
				r.doneOut = true
			}
			r.mu.Unlock()
			return ev, nil
		}
		if r.doneOut {
			r.mu.Unlock()
			return nil, ErrFinished
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Reply answers call id with res; the code's promise resolves (or, with
// res.IsError, rejects). Any goroutine, any order, any later time. It may
// block while the code is too busy to read, until the run ends.
func (r *Run) Reply(id int64, res *mcp.CallToolResult) error {
	if res == nil {
		return fmt.Errorf("reply to call %d: the result is nil", id)
	}
	b, err := json.Marshal(struct {
		JSONRPC string              `json:"jsonrpc"`
		ID      int64               `json:"id"`
		Result  *mcp.CallToolResult `json:"result"`
	}{"2.0", id, res})
	if err != nil {
		return fmt.Errorf("reply to call %d: the result cannot be encoded: %w", id, err)
	}
	return r.answer(id, append(b, '\n'))
}

// Fail answers call id with an error: the code's promise rejects with
// message (and the call is listed in the Done's tool failures).
func (r *Run) Fail(id int64, message string) error {
	b, _ := json.Marshal(rpcErrorReply(id, codeToolFailed, message))
	return r.answer(id, append(b, '\n'))
}

func (r *Run) answer(id int64, line []byte) error {
	r.mu.Lock()
	if !r.pending[id] {
		ended := r.doneSeen || r.err != nil
		r.mu.Unlock()
		if ended {
			return fmt.Errorf("answer to call %d: %w", id, r.endReason())
		}
		return fmt.Errorf("answer to call %d: no such call is waiting (answered already, or never made)", id)
	}
	delete(r.pending, id)
	r.mu.Unlock()
	if err := r.write(line); err != nil {
		return fmt.Errorf("answer to call %d: %w", id, err)
	}
	return nil
}

// endReason is why a finished run takes no answers.
func (r *Run) endReason() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.doneSeen {
		return ErrFinished
	}
	return r.err
}

// write sends one line to the runner.
func (r *Run) write(line []byte) error {
	r.stdinMu.Lock()
	defer r.stdinMu.Unlock()
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p == nil {
		return errors.New("the code's container has not started")
	}
	if _, err := p.Stdin().Write(line); err != nil {
		if reason := r.endReason(); reason != nil {
			return reason
		}
		return fmt.Errorf("writing to the code's container: %w", err)
	}
	return nil
}

// Kill stops the run now (if it still runs) and removes its container; it
// returns once the container is gone. Safe to call any number of times and
// after Done: callers should always call it when they are done with a run.
func (r *Run) Kill() {
	r.end(ErrKilled)
	r.cleanup()
	<-r.removed
}

// end records why the run ended (unless it already had) and removes the
// container.
func (r *Run) end(err error) {
	r.mu.Lock()
	if r.err == nil && !r.doneSeen {
		r.err = err
		r.pending = map[int64]bool{}
		r.queue = nil
		r.notifyLocked()
	}
	started := r.proc != nil
	r.mu.Unlock()
	if started {
		go r.cleanup()
	}
}

// cleanup kills and removes the container, once.
func (r *Run) cleanup() {
	r.cleanOnce.Do(func() {
		r.mu.Lock()
		p, t, bt := r.proc, r.timer, r.budgetTimer
		r.mu.Unlock()
		if t != nil {
			t.Stop()
		}
		if bt != nil {
			bt.Stop()
		}
		defer close(r.removed)
		if p == nil {
			return
		}
		ctx, cancel := container.CleanupContext(context.Background())
		defer cancel()
		_ = p.Remove(ctx)
	})
}

func (r *Run) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}
