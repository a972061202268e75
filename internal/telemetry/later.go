package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// A call the stdio fast path forwards to a pooled server (upstream's
// Server.Forward) gets its client span once the server's answer has
// gone to the client, not while the request is on its way: the request
// needs only the span's context (its trace, its own span id, its flags)
// for the traceparent it carries, and that is three words picked here.
// Starting the SDK's span on the request's way cost a warm call 0.8-3 %
// of its median with traces on (make bench's probe, the same pml binary
// either way, chosen by the environment, 2,500 calls a side, five runs:
// 1.008-1.030x): the span's code and memory, cold on the request's way,
// where after the answer nobody waits for them. The span the SDK makes
// then has the id the server was sent (idGenerator), the request's
// start as its own, and the name, kind, attributes and outcome a span
// started before has. (The server span made the same way was no faster:
// kept until its end, with its event, it cost as much as it saved.)

// presetSpanID is the context key of a span id picked before its span
// is made, for idGenerator to give the SDK.
type presetSpanID struct{}

// laterSpans is set while the provider is Setup's, whose ids come from
// idGenerator (a test's provider, Use, makes its own: a client span is
// then started before the request, as it was).
var laterSpans atomic.Bool

// idGenerator makes random trace and span ids as the SDK's own does,
// except that a span whose id was picked before it (ClientLater) gets
// that one.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var t trace.TraceID
	for !t.IsValid() {
		binary.BigEndian.PutUint64(t[:8], rand.Uint64())
		binary.BigEndian.PutUint64(t[8:], rand.Uint64())
	}
	return t, newSpanID()
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if id, ok := ctx.Value(presetSpanID{}).(trace.SpanID); ok && id.IsValid() {
		return id
	}
	return newSpanID()
}

func newSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		binary.BigEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}

// ClientLater is the client span of a request pml forwards to the MCP
// server named server, made when it ends (End): a value, so that a
// traced call allocates nothing for it on the request's way.
type ClientLater struct {
	parent context.Context // the request's context: its server span
	sc     trace.SpanContext
	r      Request
	server string
	began  time.Time
	// eager is the span started at once, where it cannot wait (a test's
	// provider; a request with no span around it); its context eagerCtx.
	eager    trace.Span
	eagerCtx context.Context
}

// StartClientLater is StartClient for a forwarded request: the context
// it returns carries the span's context (for the request's traceparent:
// ToMetaJSON, AppendTraceMembers); End makes the span, and records the
// request's duration as End does. With traces off (metrics only), End
// records the duration alone.
func StartClientLater(ctx context.Context, r Request, server string) (context.Context, ClientLater) {
	l := ClientLater{parent: ctx, r: r, server: server, began: time.Now()}
	if !enabled.Load() {
		return ctx, l
	}
	parent := trace.SpanContextFromContext(ctx)
	if !laterSpans.Load() || !parent.IsValid() {
		l.eagerCtx, l.eager = StartClient(ctx, r, server)
		return l.eagerCtx, l
	}
	// A child's sampling follows its parent's for every sampler
	// OTEL_TRACES_SAMPLER names (the parent's decision, or one made from
	// the trace id, which the child shares, or always the same): the
	// flags are the parent's.
	l.sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: parent.TraceID(), SpanID: newSpanID(),
		TraceFlags: parent.TraceFlags(), TraceState: parent.TraceState()})
	return trace.ContextWithSpanContext(ctx, l.sc), l
}

// End makes and ends the span, with the request's outcome (as End).
func (l *ClientLater) End(toolError bool, err error) {
	if l.eager != nil {
		End(l.eagerCtx, l.eager, l.r, false, l.began, toolError, err)
		return
	}
	t := tracer.Load()
	if !l.sc.IsSampled() || t == nil || !enabled.Load() {
		// Nothing to record (off, or a trace not sampled): the
		// duration alone.
		End(l.parent, noSpan, l.r, false, l.began, toolError, err)
		return
	}
	s := shapeOf(l.r, trace.SpanKindClient, l.server)
	ctx := context.WithValue(l.parent, presetSpanID{}, l.sc.SpanID())
	ctx, span := (*t).Start(ctx, s.name, kindOption(trace.SpanKindClient), trace.WithTimestamp(l.began))
	span.SetAttributes(s.attrs...)
	End(ctx, span, l.r, false, l.began, toolError, err)
}
