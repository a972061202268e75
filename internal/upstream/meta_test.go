package upstream

import (
	"context"
	"encoding/json"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/pml-dev/pml/internal/telemetry"
)

func TestAForwardedCallsMetaHoldsTheCallersMembersAndPmlsToken(t *testing.T) {
	for _, c := range []struct{ meta, tok, want string }{
		{``, ``, ``},
		{``, `"pml-p-1"`, `,"_meta":{"progressToken":"pml-p-1"}`},
		{`{"a":1}`, ``, `,"_meta":{"a":1}`},
		{` {"a":1,"b":{"c":[2]}} `, `"pml-p-2"`, `,"_meta":{"a":1,"b":{"c":[2]},"progressToken":"pml-p-2"}`},
		{`{}`, ``, ``},
		{`[1]`, `"t"`, `,"_meta":{"progressToken":"t"}`},
		{`{"a":`, ``, ``},
		{`{"a":1}{"b":2}`, ``, ``},
	} {
		got := string(appendMeta(nil, []byte(c.meta), c.tok))
		if got != c.want {
			t.Errorf("appendMeta(%q, %q) = %q, want %q", c.meta, c.tok, got, c.want)
		}
		if got != "" && !json.Valid([]byte("{"+got[1:]+"}")) {
			t.Errorf("%q is not a JSON member", got)
		}
	}
}

func TestCallMetaIsACopy(t *testing.T) {
	in := map[string]any{"k": "v"}
	out := callMeta(in)
	out["progressToken"] = "pml-1"
	if len(in) != 1 || callMeta(nil) != nil || callMeta(map[string]any{}) != nil {
		t.Errorf("callMeta changed the caller's map or made an empty one: %v", in)
	}
}

// A call without a _meta of its own, traced: the frame's _meta holds the
// trace context, written into the frame directly, beside pml's progress
// token; with no span in the context it is appendMeta's.
func TestATracedCallsMetaCarriesItsSpan(t *testing.T) {
	t.Cleanup(telemetry.Use(sdktrace.NewTracerProvider(), "test"))
	ctx, span := telemetry.Start(context.Background(), "call", trace.SpanKindClient)
	defer span.End()
	sc := span.SpanContext()
	parent := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	for _, c := range []struct {
		ctx       context.Context
		tok, want string
	}{
		{ctx, ``, `,"_meta":{"traceparent":"` + parent + `"}`},
		{ctx, `"pml-p-1"`, `,"_meta":{"traceparent":"` + parent + `","progressToken":"pml-p-1"}`},
		{context.Background(), `"pml-p-1"`, `,"_meta":{"progressToken":"pml-p-1"}`},
		{context.Background(), ``, ``},
	} {
		got := string(appendTracedMeta([]byte(`{"a":1`), c.ctx, c.tok))
		if got != `{"a":1`+c.want {
			t.Errorf("appendTracedMeta(%q) = %q, want %q", c.tok, got, `{"a":1`+c.want)
		}
		if !json.Valid([]byte(got + "}")) {
			t.Errorf("%q is not a JSON object's start", got)
		}
	}
}
