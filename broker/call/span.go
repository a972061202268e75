package call

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pml-dev/pml/internal/telemetry"
)

// SpanStep starts the span of one step of a call that does work (permit,
// approve, registry, install, execute); end it with span.End. Off, it
// costs one atomic load.
func SpanStep(ctx context.Context, step string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		// The name is not even built: off, a step costs nothing.
		return ctx, trace.SpanFromContext(context.Background())
	}
	return telemetry.Start(ctx, "pml."+step, trace.SpanKindInternal, attrs...)
}
