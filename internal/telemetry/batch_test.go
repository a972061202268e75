package telemetry

import (
	"context"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// countingExporter records the size of each batch it is given.
type countingExporter struct {
	mu      sync.Mutex
	batches []int
	sent    chan struct{}
	hold    chan struct{} // when not nil, an export waits for it
}

func (e *countingExporter) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	e.batches = append(e.batches, len(s))
	e.mu.Unlock()
	select {
	case e.sent <- struct{}{}:
	default:
	}
	if e.hold != nil {
		<-e.hold
	}
	return nil
}

func (e *countingExporter) Shutdown(context.Context) error { return nil }

func (e *countingExporter) got() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]int(nil), e.batches...)
}

func endSpans(tp *sdktrace.TracerProvider, n int) {
	t := tp.Tracer("test")
	for i := 0; i < n; i++ {
		_, s := t.Start(context.Background(), "s")
		s.End()
	}
}

// A full batch leaves at once, the rest when the delay has passed; past
// the queue, spans are dropped rather than held up.
func TestBatcherSendsFullBatchesAtOnceAndTheRestAfterTheDelay(t *testing.T) {
	exp := &countingExporter{sent: make(chan struct{}, 16), hold: make(chan struct{})}
	b := newBatcher(exp, bspSettings{delay: time.Hour, timeout: time.Second, maxQueue: 8, maxBatch: 4})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	endSpans(tp, 3)
	time.Sleep(20 * time.Millisecond)
	if got := exp.got(); len(got) != 0 {
		t.Fatalf("batches %v sent before a batch was full or the delay passed", got)
	}
	endSpans(tp, 1)
	select {
	case <-exp.sent:
	case <-time.After(5 * time.Second):
		t.Fatal("a full batch was not sent")
	}
	if got := exp.got(); len(got) != 1 || got[0] != 4 {
		t.Fatalf("batches %v, want one of 4", got)
	}
	// While that batch is being sent, the queue holds 8: of 10 more,
	// 2 are dropped; then ForceFlush sends the 8, in batches of 4.
	endSpans(tp, 10)
	close(exp.hold)
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := exp.got()
	total := 0
	for _, n := range got {
		if n > 4 {
			t.Errorf("a batch of %d spans, more than the batch size 4", n)
		}
		total += n
	}
	if total != 4+8 {
		t.Errorf("batches %v, want the first 4 and the 8 the queue holds", got)
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	endSpans(tp, 1) // after the stop: not queued
}

// The delay: spans that do not fill a batch leave when it has passed,
// and the stop sends what is left.
func TestBatcherSendsOnTheDelayAndAtTheStop(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newBatcher(exp, bspSettings{delay: 50 * time.Millisecond, timeout: time.Second, maxQueue: 100, maxBatch: 50})))
	endSpans(tp, 3)
	deadline := time.Now().Add(5 * time.Second)
	for len(exp.GetSpans()) < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(exp.GetSpans()); n != 3 {
		t.Fatalf("%d spans sent after the delay, want 3", n)
	}
	exp2 := &countingExporter{sent: make(chan struct{}, 16)}
	tp2 := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newBatcher(exp2, bspSettings{delay: time.Hour, timeout: time.Second, maxQueue: 100, maxBatch: 50})))
	endSpans(tp2, 5)
	if err := tp2.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := exp2.got(); len(got) != 1 || got[0] != 5 {
		t.Errorf("batches %v sent at the stop, want one of 5", got)
	}
	_ = tp.Shutdown(context.Background())
}

func TestBatcherSettingsFromTheStandardVariables(t *testing.T) {
	env := map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "200", "OTEL_BSP_EXPORT_TIMEOUT": "x", "OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1000"}
	got := bspFromEnv(func(k string) string { return env[k] })
	want := bspSettings{delay: 200 * time.Millisecond, timeout: 30 * time.Second, maxQueue: 100, maxBatch: 100}
	if got != want {
		t.Errorf("settings %+v, want %+v", got, want)
	}
}
