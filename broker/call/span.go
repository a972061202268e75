package call

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pml-dev/pml/internal/telemetry"
)

// SpanStep starts the span of one step of a call that does work
// (approve, registry, pin, install, execute); end it with span.End. Off, it
// costs one atomic load.
func SpanStep(ctx context.Context, step string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		// The name is not even built: off, a step costs nothing.
		return ctx, trace.SpanFromContext(context.Background())
	}
	return telemetry.Start(ctx, "pml."+step, trace.SpanKindInternal, attrs...)
}

// Traced returns the span in ctx when traces are on and it records
// (the request's, or that of the step that made this call), else nil:
// a step that takes no time worth a span of its own (pml.permit) is an
// event of this one. Off, it costs one atomic load.
func Traced(ctx context.Context) trace.Span {
	if !telemetry.Enabled() {
		return nil
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		return span
	}
	return nil
}
