package telemetry

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/semconv/v1.40.0/mcpconv"
)

// instruments are pml's metrics: the conventions' operation and session
// durations, and pml's own counters.
type instruments struct {
	serverOp      mcpconv.ServerOperationDuration
	clientOp      mcpconv.ClientOperationDuration
	serverSession mcpconv.ServerSessionDuration
	starts        metric.Int64Counter
	approvals     metric.Int64Counter
	egressBytes   metric.Int64Counter
	queueDepth    metric.Int64UpDownCounter
	queueWait     metric.Float64Histogram
	panics        metric.Int64Counter
}

var (
	metricsOn atomic.Bool
	// exemplarsOn: a duration may carry an example trace (the span in
	// the context it is recorded in), so it is recorded at once.
	exemplarsOn atomic.Bool
	inst        atomic.Pointer[instruments]
)

// MetricsSetup starts pml's metrics: exported over OTLP/HTTP when s asks
// for telemetry (the same OTEL_* variables as traces; the interval is
// OTEL_METRIC_EXPORT_INTERVAL's), and served for Prometheus when
// prometheus is true (Handler). Off on both counts it does nothing.
func MetricsSetup(ctx context.Context, s Settings, version string, prom bool) (handler http.Handler, shutdown func(), err error) {
	var opts []sdkmetric.Option
	var h http.Handler
	if s.On() {
		if err := s.Check(); err != nil {
			return nil, func() {}, err
		}
		var mopts []otlpmetrichttp.Option
		if s.FromConfig {
			mopts = append(mopts, otlpmetrichttp.WithEndpointURL(s.signalURL("/v1/metrics")))
		}
		exp, err := otlpmetrichttp.New(ctx, mopts...)
		if err != nil {
			return nil, func() {}, err
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	if prom {
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return nil, func() {}, err
		}
		opts = append(opts, sdkmetric.WithReader(exp))
		h = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	if len(opts) == 0 {
		return nil, func() {}, nil
	}
	exemplarsOn.Store(s.ExemplarFilter != "")
	if s.ExemplarFilter == "" {
		// No exemplars unless asked for (OTEL_METRICS_EXEMPLAR_FILTER,
		// which the SDK reads): by default the SDK offers each
		// measurement made under a sampled span to a reservoir, which
		// was half the cost of recording a call's durations, on every
		// call, for an example trace per bucket that a trace search
		// finds as well.
		opts = append(opts, sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
	}
	res, _ := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "pml"), attribute.String("service.version", version)), resource.WithFromEnv())
	if res != nil {
		opts = append(opts, sdkmetric.WithResource(res))
	}
	mp := sdkmetric.NewMeterProvider(opts...)
	m := mp.Meter(ScopeName)
	var in instruments
	if in.serverOp, err = mcpconv.NewServerOperationDuration(m); err != nil {
		return nil, func() {}, err
	}
	if in.clientOp, err = mcpconv.NewClientOperationDuration(m); err != nil {
		return nil, func() {}, err
	}
	if in.serverSession, err = mcpconv.NewServerSessionDuration(m); err != nil {
		return nil, func() {}, err
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, e := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if e != nil && err == nil {
			err = e
		}
		return c
	}
	// Counted on every call: kept by pml (an atomic add) and read when
	// the metrics are collected (tallies.go).
	tally := func(name, unit, desc string, of *tallies) {
		if _, e := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithInt64Callback(of.observe)); e != nil && err == nil {
			err = e
		}
	}
	tally("pml.calls", "{call}", "Tool calls by outcome (the audit log's decision).", &callTallies)
	tally("pml.pool.hits", "{call}", "Calls to a pooled server that found its container running.", &poolHitTallies)
	tally("pml.pool.misses", "{call}", "Calls to a pooled server that waited for its container to start.", &poolMissTallies)
	in.starts = counter("pml.container.starts", "{container}", "Server containers started (pooled and per call).")
	in.approvals = counter("pml.approvals", "{approval}", "Questions put to a person, by answer.")
	in.egressBytes = counter("pml.egress.bytes", "By", "Bytes through pml's egress proxy, by direction.")
	if err == nil {
		in.queueDepth, err = m.Int64UpDownCounter("pml.container.queue.depth", metric.WithUnit("{call}"),
			metric.WithDescription("Container starts waiting in line for a slot under sandbox.max_containers."))
	}
	if err == nil {
		in.queueWait, err = m.Float64Histogram("pml.container.queue.wait_time", metric.WithUnit("s"),
			metric.WithDescription("How long a container start waited for a slot under sandbox.max_containers (0 when one was free), by outcome."),
			metric.WithExplicitBucketBoundaries(queueWaitBuckets...))
	}
	in.panics = counter("pml.panics", "{panic}", "Panics pml recovered from while answering a request, by MCP method (the request got an internal error; pml kept running).")
	if err != nil {
		return nil, func() {}, err
	}
	inst.Store(&in)
	metricsOn.Store(true)
	return h, func() {
		metricsOn.Store(false)
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownWait)
		defer cancel()
		_ = mp.Shutdown(sctx)
	}, nil
}

func instrumentsOn() *instruments {
	if !metricsOn.Load() {
		return nil
	}
	return inst.Load()
}

// recordOp records one operation's duration by the conventions.
func recordOp(ctx context.Context, server bool, r Request, began time.Time, errType string) {
	recordDuration(ctx, server, r, time.Since(began), errType)
}

// recordDuration is recordOp with the duration measured.
func recordDuration(ctx context.Context, server bool, r Request, took time.Duration, errType string) {
	in := instrumentsOn()
	if in == nil {
		return
	}
	d := took.Seconds()
	opts := opOptions.get(opKey{r.Method, r.Tool, r.Protocol, errType}, newOpOptions)
	if server {
		in.serverOp.Inst().Record(ctx, d, opts...)
	} else {
		in.clientOp.Inst().Record(ctx, d, opts...)
	}
}

// opKey is what an operation's duration is recorded by.
type opKey struct{ method, tool, protocol, errType string }

// opOptions holds the attribute sets, as record options, of the
// operation kinds: a warm call records under the same few, built once
// each. (Kept as the option list Record takes: a list made for each
// call is an allocation, the instrument being an interface.)
var opOptions memo[opKey, []metric.RecordOption]

func newOpOptions(k opKey) []metric.RecordOption {
	attrs := []attribute.KeyValue{attribute.String("mcp.method.name", k.method), attribute.String("network.transport", "pipe")}
	if k.tool != "" {
		attrs = append(attrs, attribute.String("gen_ai.tool.name", k.tool))
	}
	if k.protocol != "" {
		attrs = append(attrs, attribute.String("mcp.protocol.version", k.protocol))
	}
	if k.errType != "" {
		attrs = append(attrs, attribute.String("error.type", k.errType))
	}
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
}

// SessionEnded records a session's duration.
func SessionEnded(began time.Time, protocol string) {
	if in := instrumentsOn(); in != nil {
		in.serverSession.Record(context.Background(), time.Since(began).Seconds(), attribute.String("mcp.protocol.version", protocol), attribute.String("network.transport", "pipe"))
	}
}

func add(c func(*instruments) metric.Int64Counter, n int64, attrs ...attribute.KeyValue) {
	if in := instrumentsOn(); in != nil {
		c(in).Add(context.Background(), n, metric.WithAttributes(attrs...))
	}
}

// CountCall counts a tool call by its outcome.
func CountCall(outcome string) {
	if metricsOn.Load() {
		callTallies.add("pml.outcome", outcome)
	}
}

// CountPool counts a call to a pooled server: a hit found it running.
func CountPool(server string, hit bool) {
	if !metricsOn.Load() {
		return
	}
	if hit {
		poolHitTallies.add("pml.server", server)
	} else {
		poolMissTallies.add("pml.server", server)
	}
}

// CountStart counts a server container started.
func CountStart(server string) {
	add(func(i *instruments) metric.Int64Counter { return i.starts }, 1, attribute.String("pml.server", server))
}

// CountApproval counts a question put to a person, by answer.
func CountApproval(answer string) {
	add(func(i *instruments) metric.Int64Counter { return i.approvals }, 1, attribute.String("pml.answer", answer))
}

// CountEgress counts bytes through the egress proxy.
func CountEgress(up, down int64) {
	add(func(i *instruments) metric.Int64Counter { return i.egressBytes }, up, attribute.String("pml.direction", "up"))
	add(func(i *instruments) metric.Int64Counter { return i.egressBytes }, down, attribute.String("pml.direction", "down"))
}

// queueWaitBuckets are the wait time's histogram bounds, in seconds: from
// no wait to past the default sandbox.timeout (the SDK's default bounds
// are meant for milliseconds). (60, 61] holds the waits that ran out at
// the default limit, so that they do not spread over a wide bucket.
var queueWaitBuckets = []float64{0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 4, 5, 7.5, 10, 12.5, 15, 17.5, 20, 25, 30, 35, 40, 45, 50, 55, 60, 61, 75, 90, 120, 180, 300}

// The outcomes of a wait for a container slot (pml.outcome of
// pml.container.queue.wait_time).
const (
	QueueSlot      = "slot"      // it got one
	QueueDeadline  = "deadline"  // the call's time ran out first
	QueueCancelled = "cancelled" // the call was cancelled first
)

// QueueDepth counts starts joining (+1) and leaving (-1) the line for a
// container slot.
func QueueDepth(delta int64) {
	if in := instrumentsOn(); in != nil {
		in.queueDepth.Add(context.Background(), delta)
	}
}

// QueueWaited records how long a start waited for a container slot.
func QueueWaited(d time.Duration, outcome string) {
	if in := instrumentsOn(); in != nil {
		in.queueWait.Record(context.Background(), d.Seconds(), metric.WithAttributes(attribute.String("pml.outcome", outcome)))
	}
}

// CountPanic counts a panic recovered while answering an MCP request
// (method) or running a tool call (tool, else "").
func CountPanic(method, tool string) {
	var attrs []attribute.KeyValue
	if method != "" {
		attrs = append(attrs, attribute.String("mcp.method.name", method))
	}
	if tool != "" {
		attrs = append(attrs, attribute.String("gen_ai.tool.name", tool))
	}
	add(func(i *instruments) metric.Int64Counter { return i.panics }, 1, attrs...)
}
