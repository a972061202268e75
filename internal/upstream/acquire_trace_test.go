package upstream

import (
	"context"
	"testing"

	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pml-dev/pml/internal/telemetry"
)

// A call that waits for the pooled server's container gets the span
// pml.container.acquire (pml.pool.hit false), from the moment it asked;
// a call that finds the server running gets none: a warm call costs no
// span here.
func TestOnlyAWaitForTheContainerIsASpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	t.Cleanup(telemetry.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), "test"))
	rt := stub(answersTools)
	s := New(Options{Name: "echo", Runtime: rt, Logger: zerolog.Nop()})
	t.Cleanup(s.Close)
	acquires := func() (n int, hit string, server string) {
		for _, sp := range rec.Ended() {
			if sp.Name() == "pml.container.acquire" {
				n++
				for _, a := range sp.Attributes() {
					switch a.Key {
					case "pml.pool.hit":
						hit = a.Value.String()
					case "pml.server":
						server = a.Value.String()
					}
				}
			}
		}
		return
	}
	if _, err := s.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, hit, server := acquires(); n != 1 || hit != "false" || server != "echo" {
		t.Fatalf("the first call (the container starts): %d acquire spans, pml.pool.hit %q, pml.server %q; want one, false, echo", n, hit, server)
	}
	if _, err := s.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := acquires(); n != 1 {
		t.Fatalf("a call that found the server running made an acquire span (%d in all)", n)
	}
}
