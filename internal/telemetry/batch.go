package telemetry

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// batcher is the span processor of pml's traces: it does what the SDK's
// batch span processor does (ended spans leave in batches from a
// goroutine of its own, by the same OTEL_BSP_* settings), with a cheaper
// front. The SDK's hands each ended span to its goroutine over a
// channel, which wakes that goroutine (another thread, a futex call) on
// every span end, on the path of the call that ended it: two wake-ups
// per warm call. Here an ended span is appended to a slice under a
// mutex, and the goroutine is woken only when a batch is full, when the
// delay has passed, or to flush.
type batcher struct {
	exp sdktrace.SpanExporter
	bsp bspSettings

	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
	spare []sdktrace.ReadOnlySpan // the slice of the batch last sent, for the next
	// ended holds the pending spans that ended (pending.go), made here
	// before a batch leaves: a call's path does not make its spans.
	ended   []*pendingSpan
	closing bool // no more ended spans are taken (Shutdown)
	stopped bool
	dropped int // spans past the queue (the SDK's processor counts them too)

	full     chan struct{} // a batch is ready (capacity 1: one wake-up is enough)
	flushReq chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// bspSettings are the batch processor's settings (OTEL_BSP_*, defaults
// as the specification has them).
type bspSettings struct {
	delay, timeout     time.Duration
	maxQueue, maxBatch int
}

// bspFromEnv reads OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_EXPORT_TIMEOUT (in
// milliseconds), OTEL_BSP_MAX_QUEUE_SIZE and OTEL_BSP_MAX_EXPORT_BATCH_SIZE
// the way the SDK does: a value that is not a positive integer is the
// default, and a batch is at most the queue.
func bspFromEnv(getenv func(string) string) bspSettings {
	num := func(key string, def int) int {
		if n, err := strconv.Atoi(strings.TrimSpace(getenv(key))); err == nil && n > 0 {
			return n
		}
		return def
	}
	s := bspSettings{
		delay:    time.Duration(num("OTEL_BSP_SCHEDULE_DELAY", 5000)) * time.Millisecond,
		timeout:  time.Duration(num("OTEL_BSP_EXPORT_TIMEOUT", 30000)) * time.Millisecond,
		maxQueue: num("OTEL_BSP_MAX_QUEUE_SIZE", 2048),
		maxBatch: num("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512),
	}
	s.maxBatch = min(s.maxBatch, s.maxQueue)
	return s
}

func newBatcher(exp sdktrace.SpanExporter, s bspSettings) *batcher {
	b := &batcher{
		exp:      exp,
		bsp:      s,
		spans:    make([]sdktrace.ReadOnlySpan, 0, s.maxBatch),
		full:     make(chan struct{}, 1),
		flushReq: make(chan chan struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go b.run()
	return b
}

// newEnvBatcher is newBatcher with the OTEL_BSP_* settings of the
// environment.
func newEnvBatcher(exp sdktrace.SpanExporter) *batcher {
	return newBatcher(exp, bspFromEnv(os.Getenv))
}

func (b *batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s: past the queue's size it is dropped (an endpoint that
// does not keep up costs a call nothing), as the SDK's processor does.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	if len(b.spans) >= b.bsp.maxQueue {
		b.dropped++
		b.mu.Unlock()
		return
	}
	b.spans = append(b.spans, s)
	ready := len(b.spans) >= b.bsp.maxBatch
	b.mu.Unlock()
	if ready {
		select {
		case b.full <- struct{}{}:
		default:
		}
	}
}

// later takes p, ended, to be made before the next batch leaves: false
// once the batcher is closing (p is then made by its caller). Past the
// queue's size p is dropped, as a span would be.
func (b *batcher) later(p *pendingSpan) bool {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return false
	}
	if len(b.spans)+len(b.ended) >= b.bsp.maxQueue {
		b.dropped++
		b.mu.Unlock()
		// The span is dropped; its request's duration is not.
		p.recordOp()
		return true
	}
	b.ended = append(b.ended, p)
	ready := len(b.spans)+len(b.ended) >= b.bsp.maxBatch
	b.mu.Unlock()
	if ready {
		select {
		case b.full <- struct{}{}:
		default:
		}
	}
	return true
}

// makeEnded makes the pending spans that ended (they come back through
// OnEnd, into the queue); closing, it takes no more after these.
func (b *batcher) makeEnded(closing bool) {
	b.mu.Lock()
	ended := b.ended
	b.ended = nil
	b.closing = b.closing || closing
	b.mu.Unlock()
	for _, p := range ended {
		p.make()
	}
}

// run sends the queued spans: a full batch at once, the rest when the
// delay has passed since the last send.
func (b *batcher) run() {
	defer close(b.done)
	t := time.NewTimer(b.bsp.delay)
	defer t.Stop()
	for {
		var flushed chan struct{}
		select {
		case <-b.stop:
			b.sendAll(true)
			return
		case <-b.full:
			b.send(true)
		case <-t.C:
			b.sendAll(false)
		case flushed = <-b.flushReq:
			b.sendAll(false)
			close(flushed)
		}
		t.Reset(b.bsp.delay)
	}
}

// send exports what is queued, in batches of at most maxBatch (when
// full is true, only when a batch is full), and reports whether it sent
// any.
func (b *batcher) send(full bool) bool {
	b.makeEnded(false)
	b.mu.Lock()
	n := len(b.spans)
	if n == 0 || full && n < b.bsp.maxBatch {
		b.mu.Unlock()
		return false
	}
	// The queue is taken whole, and the slice of the one sent before
	// takes its place: ending a span appends to a slice made before.
	queued := b.spans
	b.spans, b.spare = b.spare[:0], nil
	if b.spans == nil {
		b.spans = make([]sdktrace.ReadOnlySpan, 0, b.bsp.maxBatch)
	}
	b.mu.Unlock()
	for rest := queued; len(rest) > 0; {
		batch := rest[:min(len(rest), b.bsp.maxBatch)]
		rest = rest[len(batch):]
		ctx, cancel := context.WithTimeout(context.Background(), b.bsp.timeout)
		err := b.exp.ExportSpans(ctx, batch)
		cancel()
		if err != nil {
			otel.Handle(err)
		}
	}
	clear(queued) // the spans are garbage now
	if cap(queued) <= 4*b.bsp.maxBatch {
		b.mu.Lock()
		if b.spare == nil {
			b.spare = queued[:0]
		}
		b.mu.Unlock()
	}
	return true
}

// sendAll exports everything queued; at the stop, what is queued then
// and nothing after.
func (b *batcher) sendAll(stopping bool) {
	if stopping {
		b.makeEnded(true)
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
	}
	b.send(false)
}

// ForceFlush exports what is queued now, waiting for it (or ctx).
func (b *batcher) ForceFlush(ctx context.Context) error {
	flushed := make(chan struct{})
	select {
	case b.flushReq <- flushed:
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-flushed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued and stops the exporter, waiting at
// most until ctx ends.
func (b *batcher) Shutdown(ctx context.Context) error {
	b.stopOnce.Do(func() { close(b.stop) })
	select {
	case <-b.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.exp.Shutdown(ctx)
}
