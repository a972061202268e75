package container

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Prestarted's defaults.
const (
	DefaultPoolMin = 1
	DefaultPoolMax = 4
	// DefaultPoolDecay is how long a kind must go without a miss before
	// its pool shrinks by one container.
	DefaultPoolDecay = 30 * time.Second
	// poolStartTimeout bounds one pre-start (create, attach, start).
	poolStartTimeout = 60 * time.Second
)

// PrestartedOptions configure a Prestarted.
type PrestartedOptions struct {
	Runtime Runtime
	// Min is how many containers of a kind in use are kept ready
	// (0: DefaultPoolMin).
	Min int
	// Max bounds the ready and starting containers of one kind
	// (0: DefaultPoolMax).
	Max int
	// Idle: a kind not used for this long is shrunk to zero (0: never).
	Idle time.Duration
	// Decay: after this long without a miss a kind keeps one container
	// fewer, down to Min (0: DefaultPoolDecay).
	Decay time.Duration
	// Ready, when set, is called whenever a pre-started container has
	// become ready (Limited.Idle).
	Ready  func()
	Logger zerolog.Logger
}

// Prestarted keeps pre-started, single-use containers (it was called Pool,
// yet it reuses nothing: a container serves one call and goes; the one
// container that serves many calls is a stdio server's, reused by
// upstream.Server.acquire), so that a call pays a round trip on an
// attached pipe instead of create + attach + start (≈ 2 ms instead of
// ≈ 300 ms here).
//
// Containers are pooled per kind: one kind per distinct Spec (image,
// command, environment, user, mounts and their read-only flags, policy,
// labels), so a container only ever serves a call that would have created
// exactly the same container. Each pooled container is created, attached
// and started, its process waiting for its stdin; a call takes one, uses it
// once, and it is killed and removed while a replacement starts. Nothing
// of one call (files in its tmpfs, processes, environment changes) is
// visible to the next.
//
// Nothing starts before the first call of a kind: that call starts its
// own container (cold) and the kind's pool fills behind it. A call never
// waits for the pool: when no container is ready it starts its own, which
// also tells the pool that the kind needs more, up to Max. A kind without
// a miss for Decay keeps one fewer, down to Min; unused for Idle it keeps
// none. Containers that die while they wait are removed, never handed out.
//
// Prestarted is safe for concurrent use.
type Prestarted struct {
	o   PrestartedOptions
	now func() time.Time
	// base is cancelled by Close: pre-starts still in flight give up.
	base       context.Context
	cancelBase context.CancelFunc

	mu     sync.Mutex
	kinds  map[string]*kind
	closed bool
	// busy counts starts, leases and disposals in flight; Close waits for
	// it to reach zero.
	busy    int
	drained chan struct{}
	// epoch counts the times a container's stream said the runtime does
	// not answer (the engine's connection was lost). A container
	// pre-started in an earlier epoch may have lost its streams too,
	// without its own watcher having said so yet: it is never handed out.
	epoch uint64
}

// kind is the pool of one Spec.
type kind struct {
	key      string
	spec     Spec
	ready    []*warm
	starting int
	// target is how many containers the kind wants ready; 0 is dormant.
	target int
	// calm is when the kind last missed (or last shrank): the decay clock.
	calm     time.Time
	lastTake time.Time
	idle     *time.Timer
	// fails counts starts that failed and containers that died while
	// waiting, since a container was last handed out alive; retryAt holds
	// the refills back after such failures, so a broken image or a daemon
	// that is down does not make the pool spin.
	fails   int
	retryAt time.Time
	stats   PoolStats
}

// PoolStats describes one kind, for tests and logs.
type PoolStats struct {
	Ready, Starting, Target int
	// Hits counts calls served by a pre-started container; Misses calls
	// that found none ready and started their own; Died containers that
	// exited while waiting (never handed out).
	Hits, Misses, Died int
}

// NewPrestarted returns an empty pool; it starts nothing until the first call.
func NewPrestarted(o PrestartedOptions) *Prestarted {
	if o.Min <= 0 {
		o.Min = DefaultPoolMin
	}
	if o.Max <= 0 {
		o.Max = DefaultPoolMax
	}
	if o.Min > o.Max {
		o.Min = o.Max
	}
	if o.Decay <= 0 {
		o.Decay = DefaultPoolDecay
	}
	p := &Prestarted{o: o, now: time.Now, kinds: map[string]*kind{}}
	p.base, p.cancelBase = context.WithCancel(context.Background())
	return p
}

// Run is Run (the package function) with a container from the pool when
// one is ready: it writes req.Stdin, collects the answer with the same
// output cap, timeout, cancellation and OOM reporting, and then the
// container is killed and removed in the background.
func (p *Prestarted) Run(ctx context.Context, spec Spec, req Request) (Result, error) {
	began := time.Now()
	out := newCapped(req.Limit, req.AnswerLine)
	streams := out.streams()
	if len(req.Stdin) <= earlyStdinMax {
		// A container started for this call may get its request
		// beside its start (Streams.Stdin); collect writes it too, for
		// a pre-started one and for the runtimes that do not.
		streams.Stdin = req.Stdin
	}
	l, err := p.Acquire(ctx, spec, streams)
	if err != nil {
		if req.Disposed != nil {
			req.Disposed()
		}
		return stoppedStart(err), err
	}
	l.disposed = req.Disposed
	defer l.Release()
	// What the container wrote while it waited reaches this call before
	// its answer: out never blocks, so the wait is short.
	if w, ok := l.Process.(*warm); ok {
		w.stdout.flush()
		w.stderr.flush()
	}
	res, err := collect(ctx, l, out, req.Stdin, began)
	res.Warm = l.Warm
	if res.TimedOut || res.Cancelled {
		// Removed now, within DeadlineGrace, so that the caller hears
		// what the engine confirmed; Release's removal in the background
		// then finds it gone (or goes on trying).
		d, exit := l.removeWithin(ctx)
		res.Disposal, res.Exit = &d, exit
		l.stopped = true
		res.Duration = time.Since(began)
	}
	return res, err
}

// earlyStdinMax bounds the input a container started for a call gets
// beside its start (Streams.Stdin): a request, not a stream.
const earlyStdinMax = 64 << 10

// Lease is one single-use container: pre-started from the pool (Warm) or,
// when none was ready, started for this call. Release ends it.
type Lease struct {
	Process
	// Warm: the container was pre-started.
	Warm bool

	pool *Prestarted
	k    *kind
	once sync.Once
	// disposed is called once the container is removed (Request.Disposed).
	disposed func()
	// stopped: the call was stopped (deadline, cancellation); its kind is
	// not refilled now (see Release).
	stopped bool
}

// Acquire returns a container of spec whose output goes to streams: a
// pre-started one when the pool has one ready, else one started now. It
// never waits for the pool. The caller must Release the lease.
func (p *Prestarted) Acquire(ctx context.Context, spec Spec, streams Streams) (*Lease, error) {
	w, k := p.take(spec)
	if w != nil {
		w.stdout.attach(streams.Stdout)
		w.stderr.attach(streams.Stderr)
		p.o.Logger.Debug().Str("container", short(w.ID())).Str("image", spec.Image).Msg("pool: pre-started container taken")
		return &Lease{Process: w, Warm: true, pool: p, k: k}, nil
	}
	p.o.Logger.Debug().Str("image", spec.Image).Msg("pool: none ready, starting a container for this call")
	proc, err := p.o.Runtime.Start(ctx, spec, streams)
	if err != nil {
		p.mu.Lock()
		if errors.Is(err, ErrUnavailable) {
			p.lost()
		}
		p.busy--
		p.signalDrained()
		p.mu.Unlock()
		return nil, err
	}
	return &Lease{Process: proc, pool: p, k: k}, nil
}

// removeWithin is RemoveWithin for a lease: the pool counts the removal
// in flight until it ends (Close waits for it, bounded), and Disposed is
// called once it has.
func (l *Lease) removeWithin(ctx context.Context) (Disposal, Exit) {
	p := l.pool
	p.mu.Lock()
	p.busy++
	p.mu.Unlock()
	disposed := l.disposed
	l.disposed = nil
	return removeWithin(ctx, l.Process, p.o.Logger, "pool: removing a stopped call's container", func() {
		if disposed != nil {
			disposed()
		}
		p.mu.Lock()
		p.busy--
		p.signalDrained()
		p.mu.Unlock()
	})
}

// Release kills and removes the container in the background (it is never
// used again) and lets the pool start a replacement. Safe to call twice.
func (l *Lease) Release() {
	l.once.Do(func() {
		p := l.pool
		p.mu.Lock()
		// The replacement starts now that the call is done, so that its
		// create does not compete with the call for the CPU and the
		// daemon; a warm call takes milliseconds, so it starts barely
		// later than it would at the take.
		if lostRuntime(l.Process) {
			p.lost()
		}
		// Not after a stopped call: the engine may be what stopped it, and
		// a pml that exits right after (pml call, bounded by its deadline)
		// would leave the replacement behind. The kind's next call
		// refills it.
		if l.k != nil && !l.stopped {
			p.refill(l.k)
		}
		p.busy--
		p.dispose(l.Process, l.disposed)
		p.signalDrained()
		p.mu.Unlock()
	})
}

// take hands out a ready container of spec's kind, or nil. Either way it
// counts as a lease in flight (busy) and records the demand. The kind is
// nil when the pool is closed.
func (p *Prestarted) take(spec Spec) (*warm, *kind) {
	key := specKey(spec)
	// What each mount's source is now, outside the lock (a stat each).
	sources := mountSources(spec)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.busy++
	if p.closed {
		return nil, nil
	}
	now := p.now()
	k := p.kinds[key]
	if k == nil {
		k = &kind{key: key, spec: spec}
		p.kinds[key] = k
	}
	k.lastTake = now
	p.armIdle(k)
	dormant := k.target == 0
	if dormant {
		k.target = p.o.Min
		k.calm = now
	}
	// Shrink by one per Decay period without a miss.
	if periods := int(now.Sub(k.calm) / p.o.Decay); periods > 0 {
		k.target = max(p.o.Min, k.target-periods)
		k.calm = now
	}
	for len(k.ready) > k.target {
		p.dispose(k.ready[0])
		k.ready = k.ready[1:]
	}
	for len(k.ready) > 0 {
		w := k.ready[0]
		k.ready = k.ready[1:]
		if w.dead() {
			// Dead, but its watcher has not seen it yet (it waits for
			// p.mu): count and remove it here; the watcher will not find
			// it among the ready ones any more.
			k.stats.Died++
			p.failed(k)
			p.dispose(w)
			continue
		}
		if w.epoch != p.epoch {
			// Pre-started before the runtime's connection was lost: its
			// streams may have gone with it, though its watcher has not
			// said so yet.
			p.dispose(w)
			continue
		}
		if !sameSources(w.sources, sources) {
			// A mount's source was removed (and perhaps made again)
			// since it started: the container holds the old directory,
			// where every path is "no such file or directory". The
			// call starts a fresh one instead; the other stale ones
			// go the same way as they come up.
			p.o.Logger.Info().Str("container", short(w.proc.ID())).Str("image", k.spec.Image).
				Msg("pool: a mount's source was replaced since this container started; not handed out")
			p.dispose(w)
			continue
		}
		k.stats.Hits++
		k.fails = 0
		return w, k
	}
	k.stats.Misses++
	if !dormant {
		// Demand outran the pool: keep one more, up to Max.
		k.target = min(p.o.Max, k.target+1)
		k.calm = now
	}
	return nil, k
}

// refill starts containers until the kind has its target ready or
// starting. Called with p.mu held.
func (p *Prestarted) refill(k *kind) {
	if p.closed || k.target == 0 || p.kinds[k.key] != k || p.now().Before(k.retryAt) {
		return
	}
	for len(k.ready)+k.starting < k.target {
		k.starting++
		p.busy++
		go p.start(k, p.epoch)
	}
}

// start pre-starts one container for k, in the given epoch.
func (p *Prestarted) start(k *kind, epoch uint64) {
	// The mounts' sources as they are before the container is made: a
	// source replaced after this is found at take.
	w := &warm{stdout: &handoff{}, stderr: &handoff{}, epoch: epoch, sources: mountSources(k.spec)}
	ctx, cancel := context.WithTimeout(p.base, poolStartTimeout)
	// A pre-start never queues for a slot under the container cap: with
	// every slot taken by calls, the kind simply waits for its next refill.
	proc, err := p.o.Runtime.Start(WithoutQueue(ctx), k.spec, Streams{Stdout: w.stdout, Stderr: w.stderr})
	cancel()

	ready := false
	defer func() {
		// After the lock is left: Ready may lead to Reclaim.
		if ready && p.o.Ready != nil {
			p.o.Ready()
		}
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.signalDrained()
	p.busy--
	k.starting--
	if err != nil && p.closed {
		return // given up by Close; the runtime removed what it made
	}
	if errors.Is(err, ErrAtCap) {
		return // not a failure of the kind: calls hold every slot
	}
	if errors.Is(err, ErrUnavailable) {
		p.lost()
	}
	if err != nil {
		p.failed(k)
		p.o.Logger.Warn().Err(err).Str("image", k.spec.Image).Time("retry_after", k.retryAt).
			Msg("pool: could not pre-start a container; calls start their own meanwhile")
		return
	}
	w.proc = proc
	go p.watch(k, w)
	if p.closed || k.target == 0 || p.kinds[k.key] != k || len(k.ready) >= k.target || epoch != p.epoch {
		p.dispose(w)
		return
	}
	k.ready = append(k.ready, w)
	ready = true
	p.o.Logger.Debug().Str("container", short(proc.ID())).Str("image", k.spec.Image).Int("ready", len(k.ready)).
		Msg("pool: container pre-started and waiting")
}

// watch follows a pooled container's exit (through the runtime's one
// watch of it). One that exits before it was handed out is removed and
// replaced.
func (p *Prestarted) watch(k *kind, w *warm) {
	<-w.proc.Done()
	exit, _ := w.proc.Exit()
	p.mu.Lock()
	defer p.mu.Unlock()
	if lostRuntime(w.proc) {
		p.lost()
	}
	for i, r := range k.ready {
		if r == w {
			k.ready = append(k.ready[:i], k.ready[i+1:]...)
			k.stats.Died++
			p.failed(k)
			p.o.Logger.Warn().Str("container", short(w.ID())).Str("image", k.spec.Image).Int("exit_code", exit.Code).
				Msg("pool: a pre-started container exited while waiting; removed, never handed out")
			p.dispose(w)
			p.refill(k)
			return
		}
	}
}

// lost starts a new epoch: the runtime's connection was lost, so no
// container pre-started before now is handed out. Called with p.mu held.
func (p *Prestarted) lost() {
	p.epoch++
}

// lostRuntime reports whether p ended because its runtime stopped
// answering (rather than by its own exit).
func lostRuntime(p Process) bool {
	if !Exited(p) {
		return false
	}
	_, err := p.Exit()
	return errors.Is(err, ErrUnavailable)
}

// failed records a failed start or an early death and holds refills back:
// not at all after the first, then 1 s, 2 s, 4 s … up to a minute.
func (p *Prestarted) failed(k *kind) {
	k.fails++
	if k.fails > 1 {
		k.retryAt = p.now().Add(min(time.Minute, time.Second<<min(k.fails-2, 6)))
	}
}

// armIdle (re)starts the kind's idle timer. Called with p.mu held.
func (p *Prestarted) armIdle(k *kind) {
	if p.o.Idle <= 0 {
		return
	}
	if k.idle == nil {
		k.idle = time.AfterFunc(p.o.Idle, func() { p.shrink(k) })
		return
	}
	k.idle.Reset(p.o.Idle)
}

// shrink empties a kind that was not used for Idle.
func (p *Prestarted) shrink(k *kind) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.now().Sub(k.lastTake) < p.o.Idle || k.target == 0 {
		return // used again since the timer fired
	}
	k.target = 0
	for _, w := range k.ready {
		p.dispose(w)
	}
	k.ready = nil
	p.o.Logger.Debug().Str("image", k.spec.Image).Dur("idle", p.o.Idle).Msg("pool: kind unused, emptied")
	if k.starting == 0 && p.kinds[k.key] == k {
		delete(p.kinds, k.key)
	}
}

// dispose kills and removes a container in the background. Called with
// p.mu held.
func (p *Prestarted) dispose(proc Process, done ...func()) {
	p.busy++
	go func() {
		for _, f := range done {
			if f != nil {
				defer f()
			}
		}
		removeConfirmed(context.Background(), proc, p.o.Logger, "pool: removing a used container")
		p.mu.Lock()
		p.busy--
		p.signalDrained()
		p.mu.Unlock()
	}()
}

// signalDrained wakes Close when nothing is in flight. Called with p.mu
// held.
func (p *Prestarted) signalDrained() {
	if p.busy == 0 && p.drained != nil {
		close(p.drained)
		p.drained = nil
	}
}

// Close stops the pool: nothing more is pre-started, pre-starts in flight
// are cancelled, every ready container is killed and removed, and Close
// returns once every start, lease and removal in flight has finished
// (calls still running keep their containers until they Release them), or
// when ctx ends.
func (p *Prestarted) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	p.cancelBase()
	for _, k := range p.kinds {
		if k.idle != nil {
			k.idle.Stop()
		}
		for _, w := range k.ready {
			p.dispose(w)
		}
		k.ready = nil
		k.target = 0
	}
	p.kinds = map[string]*kind{}
	for p.busy > 0 {
		if p.drained == nil {
			p.drained = make(chan struct{})
		}
		ch := p.drained
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		p.mu.Lock()
	}
	p.mu.Unlock()
	return nil
}

// Reclaim kills and removes one pre-started container that waits for a
// call (the oldest of the kind used least recently), so that its slot
// under the container cap goes to a call that needs a container now. It
// reports whether it found one. Such a kind refills later, after a call.
func (p *Prestarted) Reclaim() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	var victim *kind
	for _, k := range p.kinds {
		if len(k.ready) > 0 && (victim == nil || k.lastTake.Before(victim.lastTake)) {
			victim = k
		}
	}
	if victim == nil {
		return false
	}
	w := victim.ready[0]
	victim.ready = victim.ready[1:]
	p.dispose(w)
	return true
}

// Stats describes the kind of spec (zero when it has none).
func (p *Prestarted) Stats(spec Spec) PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.kinds[specKey(spec)]
	if k == nil {
		return PoolStats{}
	}
	s := k.stats
	s.Ready, s.Starting, s.Target = len(k.ready), k.starting, k.target
	return s
}

// specKey names a kind. The spec may carry secrets in its environment:
// only this digest of it is kept as a key, and it is never logged.
func specKey(spec Spec) string {
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// warm is a pre-started container: the runtime's Process, with its output
// held back until a call takes it.
type warm struct {
	proc           Process
	stdout, stderr *handoff
	// epoch is the pool's epoch when its start began.
	epoch uint64
	// sources are its mounts' sources when its start began (mountSources).
	sources []*source
}

// source is a mount's source as it was: the file, and when it was made
// (its birth time in ns where the file system keeps one, else 0). An
// inode number alone does not tell a directory made again: a file
// system hands a removed directory's number to the next one made.
type source struct {
	fi   os.FileInfo
	born int64
}

// mountSources is what each mount of spec has as its source on this
// machine now (nil where it cannot be looked at: not a path here, as on
// a remote engine, or gone).
func mountSources(spec Spec) []*source {
	if len(spec.Mounts) == 0 {
		return nil
	}
	out := make([]*source, len(spec.Mounts))
	for i, m := range spec.Mounts {
		if fi, err := os.Stat(m.Source); err == nil {
			out[i] = &source{fi: fi, born: bornOf(m.Source)}
		}
	}
	return out
}

// sameSources reports whether the sources a container started with
// (then) are still the same files (now): a source removed, or removed
// and made again (another inode at the same path, or the same inode
// number born again), is not.
func sameSources(then, now []*source) bool {
	for i, was := range then {
		if was == nil {
			continue
		}
		if i >= len(now) || now[i] == nil || !os.SameFile(was.fi, now[i].fi) {
			return false
		}
		if was.born != 0 && now[i].born != 0 && was.born != now[i].born {
			return false
		}
	}
	return true
}

func (w *warm) ID() string                             { return w.proc.ID() }
func (w *warm) Stdin() io.WriteCloser                  { return w.proc.Stdin() }
func (w *warm) Done() <-chan struct{}                  { return w.proc.Done() }
func (w *warm) Exit() (Exit, error)                    { return w.proc.Exit() }
func (w *warm) Wait(ctx context.Context) (Exit, error) { return w.proc.Wait(ctx) }
func (w *warm) Kill(ctx context.Context) error         { return w.proc.Kill(ctx) }
func (w *warm) Remove(ctx context.Context) error       { return w.proc.Remove(ctx) }

func (w *warm) dead() bool { return Exited(w.proc) }

// handoffBuffer bounds what a waiting container may write before it is
// handed out (a server's start-up banner on stderr); the rest is dropped.
const handoffBuffer = 64 << 10

// handoff is a pooled container's output stream: held back while the
// container waits, then delivered to the caller that takes it.
type handoff struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (h *handoff) Write(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w != nil {
		return h.w.Write(b)
	}
	if room := handoffBuffer - len(h.buf); room > 0 {
		h.buf = append(h.buf, b[:min(len(b), room)]...)
	}
	return len(b), nil
}

// flush waits until what was held back at attach has been delivered.
func (h *handoff) flush() {
	h.mu.Lock()
	//lint:ignore SA2001 an empty critical section: waiting for the holder is the point
	h.mu.Unlock()
}

// attach sends what was held back, then everything after, to w (nil
// discards). It does not block: w may be a pipe that its reader only
// starts reading after attach returns. The held-back bytes are written
// from a goroutine that keeps h.mu locked until they are delivered, so
// later output still comes after them.
func (h *handoff) attach(w io.Writer) {
	if w == nil {
		w = io.Discard
	}
	h.mu.Lock()
	h.w = w
	buf := h.buf
	h.buf = nil
	if len(buf) == 0 {
		h.mu.Unlock()
		return
	}
	go func() {
		defer h.mu.Unlock() // a sync.Mutex may be unlocked by another goroutine
		_, _ = w.Write(buf)
	}()
}
