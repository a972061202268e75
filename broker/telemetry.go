package broker

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/telemetry"
)

// spanStep starts the span of one step of a call that does work (permit,
// approve, registry, install, execute); end it with span.End. Off, it
// costs one atomic load.
func spanStep(ctx context.Context, step string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return call.SpanStep(ctx, step, attrs...)
}

// tracedAsk gives each question put to a person (an approval through the
// client's dialog) its span, so a trace shows the time the person took
// and the answer. Off, ask is returned as it is.
func tracedAsk(ask func(context.Context, workflow.Approval) (string, bool)) func(context.Context, workflow.Approval) (string, bool) {
	if ask == nil || !telemetry.Active() {
		return ask
	}
	return func(ctx context.Context, a workflow.Approval) (string, bool) {
		ctx, span := spanStep(ctx, "approve", attribute.String("pml.approval.type", string(a.ApprovalType)))
		choice, shown := ask(ctx, a)
		span.SetAttributes(attribute.String("pml.approval.answer", choice), attribute.Bool("pml.approval.shown", shown))
		telemetry.CountApproval(choice)
		span.End()
		return choice, shown
	}
}

// callSpan gives a call made outside any MCP request (pml call) a span
// of its own, so its steps form one trace; inside a request (its server
// span in ctx) it adds nothing.
func callSpan(ctx context.Context, tool string) (context.Context, func(call.Result)) {
	if !telemetry.Enabled() || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, func(call.Result) {}
	}
	ctx, span := telemetry.Start(ctx, "pml call "+tool, trace.SpanKindInternal, attribute.String("gen_ai.tool.name", tool))
	return ctx, func(res call.Result) {
		if res.IsError {
			telemetry.Fail(span, "tool_error", "the tool's result is an error")
		}
		span.End()
	}
}
