package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// A request's span is settled when the request begins and made when it
// ends. The SDK's span start (its ids, the sampler, the span's record
// and attributes) was on a call's path before its answer: in make
// bench's telemetry row, the server span and the client span pml starts
// for a warm call cost more of its median than anything else telemetry
// does. A pendingSpan has the span's identity from the start (the trace
// id, its own id, the sampled flag), which is all a call needs while it
// runs: the trace context it sends the server, the parent of the steps'
// spans. What is done to it meanwhile (an event, attributes, a status)
// is kept; after the request ended, the SDK's span is made with those
// ids, begun when the request began and ended when it ended: by Setup's
// batcher before the span's batch leaves (End, make).
//
// It is only as faithful as its sampling decision: pml makes one only
// under the samplers whose decision it can take itself, the default
// (parentbased_always_on) and always_on, with a provider that takes the
// ids it is given (ids); under any other sampler spans start as before.

// deferMode is how spans are sampled when their start can be deferred.
type deferMode int32

const (
	// deferOff: spans start when their request begins.
	deferOff deferMode = iota
	// deferParentBased: sampled as the parent is, a root always
	// (ParentBased(AlwaysSample), the SDK's default).
	deferParentBased
	// deferAlways: always sampled (AlwaysSample).
	deferAlways
)

var deferring atomic.Int32

// samplerFor is the sampler pml gives its provider for the value of
// OTEL_TRACES_SAMPLER, and how its spans can be deferred under it: nil
// (the SDK reads the variable itself) and deferOff for any other
// sampler. It reads the value as the SDK does.
func samplerFor(value string) (sdktrace.Sampler, deferMode) {
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), deferParentBased
	case "always_on":
		return sdktrace.AlwaysSample(), deferAlways
	}
	return nil, deferOff
}

// ids is the provider's id generator: random ids, except for the span a
// pendingSpan makes, which gets the ids it was given when its request
// began (found in the context it is started with).
type ids struct{}

type presetKey struct{}

func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if p, ok := ctx.Value(presetKey{}).(*pendingSpan); ok {
		return p.sc.TraceID(), p.sc.SpanID()
	}
	return newTraceID(), newSpanID()
}

func (ids) NewSpanID(ctx context.Context, traceID trace.TraceID) trace.SpanID {
	if p, ok := ctx.Value(presetKey{}).(*pendingSpan); ok && p.sc.TraceID() == traceID {
		return p.sc.SpanID()
	}
	return newSpanID()
}

// newTraceID and newSpanID are random and never zero (a zero id is
// invalid), from the runtime's generator: per thread, without a lock.
func newTraceID() (t trace.TraceID) {
	for !t.IsValid() {
		binary.BigEndian.PutUint64(t[:8], rand.Uint64())
		binary.BigEndian.PutUint64(t[8:], rand.Uint64())
	}
	return t
}

func newSpanID() (s trace.SpanID) {
	for !s.IsValid() {
		binary.BigEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}

// pendingSpan is a request span the SDK makes when it ends (above).
type pendingSpan struct {
	embedded.Span
	sc trace.SpanContext
	// parent is the span context of the span's parent (invalid for a
	// root span): all the SDK reads of the context a span starts in.
	parent trace.SpanContext
	// key is what the span's name, kind and attributes are built from
	// (its shape), when it is made; a server span's attributes are its
	// request's as End knows it (ender), as on a span made at once.
	key   shapeKey
	ender *Request
	began time.Time

	mu    sync.Mutex
	ended bool
	ops   []pendingOp
	// endAt and endOpts are its End's.
	endAt   time.Time
	endOpts []trace.SpanEndOption
	// took is its request's duration, recorded when the span is made
	// (recordLater), or nil.
	took *laterOp
	// Room for the one event of a warm call (the permission's
	// decision), in the span's own allocation.
	op [1]pendingOp
}

// presetContext is the context a pendingSpan's span is started in: its
// parent's span context, with the span's ids for the provider's id
// generator.
type presetContext struct {
	context.Context
	p *pendingSpan
}

func (c *presetContext) Value(key any) any {
	if key == (presetKey{}) {
		return c.p
	}
	return c.Context.Value(key)
}

// pendingOp is one thing done to a pendingSpan before it was made, done
// again to the span in the same order.
type pendingOp struct {
	kind  opKind
	at    time.Time
	name  string
	event eventKey // opKeyedEvent's
	more  *opMore  // the rest, which a warm call does not do
}

type opMore struct {
	attrs  []attribute.KeyValue
	events []trace.EventOption
	err    error
	code   codes.Code
	link   trace.Link
}

type opKind uint8

const (
	opAttrs opKind = iota
	opEvent
	opKeyedEvent
	opError
	opStatus
	opName
	opLink
)

// startPending settles the identity of a span of the shape k gives, started in ctx,
// as the provider's sampler would, and returns ctx with it; false when
// spans are not deferred.
func startPending(ctx context.Context, k shapeKey) (context.Context, trace.Span, bool) {
	mode := deferMode(deferring.Load())
	if mode == deferOff {
		return ctx, nil, false
	}
	psc := trace.SpanContextFromContext(ctx)
	cfg := trace.SpanContextConfig{TraceState: psc.TraceState()}
	if psc.TraceID().IsValid() {
		cfg.TraceID, cfg.SpanID = psc.TraceID(), newSpanID()
	} else {
		cfg.TraceID, cfg.SpanID = newTraceID(), newSpanID()
	}
	if mode == deferAlways || !psc.IsValid() || psc.IsSampled() {
		cfg.TraceFlags = psc.TraceFlags() | trace.FlagsSampled
	} else {
		cfg.TraceFlags = psc.TraceFlags() &^ trace.FlagsSampled
	}
	p := &pendingSpan{sc: trace.NewSpanContext(cfg), parent: psc, key: k, began: time.Now()}
	p.ops = p.op[:0]
	return trace.ContextWithSpan(ctx, p), p, true
}

func (p *pendingSpan) SpanContext() trace.SpanContext { return p.sc }

// IsRecording is true for a sampled span until it ends, as the SDK's.
func (p *pendingSpan) IsRecording() bool {
	if !p.sc.IsSampled() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.ended
}

// do keeps op for the span, unless it ended or will not be recorded.
func (p *pendingSpan) do(op pendingOp) {
	if !p.sc.IsSampled() {
		return
	}
	p.mu.Lock()
	if !p.ended {
		p.ops = append(p.ops, op)
	}
	p.mu.Unlock()
}

func (p *pendingSpan) SetAttributes(kv ...attribute.KeyValue) {
	if len(kv) > 0 {
		p.do(pendingOp{kind: opAttrs, more: &opMore{attrs: kv}})
	}
}

func (p *pendingSpan) AddEvent(name string, options ...trace.EventOption) {
	p.do(pendingOp{kind: opEvent, at: time.Now(), name: name, more: &opMore{events: options}})
}

// addEvent keeps an event of two string attributes (AddEvent) as its
// key: its options are found when the span is made.
func (p *pendingSpan) addEvent(k eventKey) {
	p.do(pendingOp{kind: opKeyedEvent, at: time.Now(), event: k})
}

// request is the request as End knows it, whose attributes a server
// span gets.
func (p *pendingSpan) request(r *Request) {
	p.mu.Lock()
	p.ender = r
	p.mu.Unlock()
}

func (p *pendingSpan) RecordError(err error, options ...trace.EventOption) {
	if err != nil {
		p.do(pendingOp{kind: opError, at: time.Now(), more: &opMore{err: err, events: options}})
	}
}

func (p *pendingSpan) SetStatus(code codes.Code, description string) {
	p.do(pendingOp{kind: opStatus, name: description, more: &opMore{code: code}})
}

func (p *pendingSpan) SetName(name string) { p.do(pendingOp{kind: opName, name: name}) }

func (p *pendingSpan) AddLink(link trace.Link) {
	p.do(pendingOp{kind: opLink, more: &opMore{link: link}})
}

func (p *pendingSpan) TracerProvider() trace.TracerProvider { return otel.GetTracerProvider() }

// End ends the span: it is made, begun when its request began, with what
// was done to it meanwhile, and ended when End was called. Under Setup's
// provider that is done by its batcher (batch.go), before the batch it
// goes in leaves, not here on the call's path; elsewhere (another span
// processor) at once.
func (p *pendingSpan) End(options ...trace.SpanEndOption) {
	p.mu.Lock()
	if p.ended {
		p.mu.Unlock()
		return
	}
	p.ended = true
	p.endAt, p.endOpts = time.Now(), options
	p.mu.Unlock()
	if !p.sc.IsSampled() || tracer.Load() == nil {
		p.recordOp()
		return
	}
	if m := maker.Load(); m != nil && m.later(p) {
		return
	}
	p.make()
}

// laterOp is what the request's duration is recorded by.
type laterOp struct {
	server  bool
	r       Request
	began   time.Time
	errType string
}

// recordLater keeps the request's duration to be recorded when the span
// is made, by the batcher of Setup's provider; false (the caller records
// it now) without that batcher, metrics, or a sampled span, or when a
// duration may carry an example trace (which needs the span's context).
func (p *pendingSpan) recordLater(server bool, r Request, began time.Time, errType string) bool {
	if !p.sc.IsSampled() || maker.Load() == nil || instrumentsOn() == nil || exemplarsOn.Load() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return false
	}
	p.took = &laterOp{server: server, r: r, began: began, errType: errType}
	return true
}

// recordOp records the duration recordLater kept, once.
func (p *pendingSpan) recordOp() {
	p.mu.Lock()
	op := p.took
	p.took = nil
	p.mu.Unlock()
	if op != nil {
		recordDuration(context.Background(), op.server, op.r, p.endAt.Sub(op.began), op.errType)
	}
}

// maker is the batcher of Setup's provider, which makes ended pending
// spans before it sends a batch; nil under another provider.
var maker atomic.Pointer[batcher]

// make makes the span of p, which ended, and ends it.
func (p *pendingSpan) make() {
	defer p.recordOp()
	t := tracer.Load()
	if t == nil {
		return
	}
	p.mu.Lock()
	ops, key, ender := p.ops, p.key, p.ender
	p.mu.Unlock()
	shape := shapeOf(key.r, key.kind, key.server)
	name := shape.name
	for _, op := range ops {
		if op.kind == opName {
			name = op.name
		}
	}
	start := make([]trace.SpanStartOption, 0, len(shape.opts)+1)
	start = append(append(start, shape.opts...), trace.WithTimestamp(p.began))
	parent := context.Background()
	if p.parent.IsValid() {
		parent = trace.ContextWithSpanContext(parent, p.parent)
	}
	_, span := (*t).Start(&presetContext{parent, p}, name, start...)
	if ender != nil {
		span.SetAttributes(shapeOf(*ender, key.kind, key.server).attrs...)
	} else {
		span.SetAttributes(shape.attrs...)
	}
	for _, op := range ops {
		switch op.kind {
		case opAttrs:
			span.SetAttributes(op.more.attrs...)
		case opEvent:
			span.AddEvent(op.name, withTime(op.more.events, op.at)...)
		case opKeyedEvent:
			span.AddEvent(op.event.name, withTime(eventOptionsOf(op.event), op.at)...)
		case opError:
			span.RecordError(op.more.err, withTime(op.more.events, op.at)...)
		case opStatus:
			span.SetStatus(op.more.code, op.name)
		case opLink:
			span.AddLink(op.more.link)
		}
	}
	end := make([]trace.SpanEndOption, 0, len(p.endOpts)+1)
	span.End(append(append(end, trace.WithTimestamp(p.endAt)), p.endOpts...)...)
}

// withTime is an event's options with the time it happened first: a
// time the options name themselves comes later, and wins.
func withTime(options []trace.EventOption, at time.Time) []trace.EventOption {
	out := make([]trace.EventOption, 0, len(options)+1)
	return append(append(out, trace.WithTimestamp(at)), options...)
}
