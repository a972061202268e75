// Package telemetry gives pml OpenTelemetry traces (and the metrics of
// metrics.go), by the OpenTelemetry semantic conventions for MCP. It is
// off unless configured, and then free: every function here returns at
// once, allocating nothing, while Enabled is false; the broker calls
// them unconditionally.
//
// It is configured the standard way, by the OTEL_* variables the
// OpenTelemetry SDK and its OTLP exporter read (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_TRACES_SAMPLER, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, …).
// Spans leave in batches from a goroutine of their own: an endpoint that
// cannot be reached costs a call nothing (spans past the queue are
// dropped), and pml's exit waits for the last batch at most ShutdownWait.
package telemetry

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName names pml's instrumentation scope.
const ScopeName = "github.com/pml-dev/pml"

// ShutdownWait bounds how long pml's exit waits for the last spans.
const ShutdownWait = 3 * time.Second

var (
	enabled atomic.Bool
	tracer  atomic.Pointer[trace.Tracer]
	// prop reads and writes W3C trace context (traceparent, tracestate).
	prop = propagation.TraceContext{}
)

// Enabled reports whether traces are being recorded.
func Enabled() bool { return enabled.Load() }

// Settings is what configures telemetry, read from the environment
// (FromEnv).
type Settings struct {
	// Endpoint is the OTLP endpoint traces go to ("" is off).
	Endpoint string
	// Protocol is the OTLP protocol asked for; pml speaks http/protobuf.
	Protocol string
	// Disabled is OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
	Disabled bool
	// ExemplarFilter is OTEL_METRICS_EXEMPLAR_FILTER: unset, metrics
	// carry no exemplars (MetricsSetup).
	ExemplarFilter string
	// FromConfig: Endpoint is .pml.json's telemetry.endpoint (a base
	// URL: traces go to its /v1/traces, metrics to /v1/metrics), not a
	// variable the exporters read themselves.
	FromConfig bool
}

// WithConfig is s with .pml.json's telemetry.endpoint when no variable
// names an endpoint: the standard variables win.
func (s Settings) WithConfig(endpoint string) Settings {
	if s.Endpoint == "" && endpoint != "" {
		s.Endpoint, s.FromConfig = endpoint, true
	}
	return s
}

// signalURL is the URL of one signal's path under a configured base.
func (s Settings) signalURL(path string) string {
	return strings.TrimRight(s.Endpoint, "/") + path
}

// FromEnv reads the settings the standard variables give.
func FromEnv(getenv func(string) string) Settings {
	s := Settings{
		Endpoint: first(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), getenv("OTEL_EXPORTER_OTLP_ENDPOINT")),
		Protocol: first(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL")),

		ExemplarFilter: first(getenv("OTEL_METRICS_EXEMPLAR_FILTER")),
	}
	exp := strings.TrimSpace(strings.ToLower(getenv("OTEL_TRACES_EXPORTER")))
	s.Disabled = strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") || exp == "none"
	return s
}

func first(v ...string) string {
	for _, s := range v {
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	return ""
}

// On reports whether s asks for telemetry.
func (s Settings) On() bool { return !s.Disabled && s.Endpoint != "" }

// Check says what is wrong with settings that ask for telemetry.
func (s Settings) Check() error {
	switch s.Protocol {
	case "", "http/protobuf":
		return nil
	case "grpc":
		return fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=grpc: pml exports OTLP over http/protobuf only; point OTEL_EXPORTER_OTLP_ENDPOINT at the receiver's OTLP/HTTP port (4318 by default) and set the protocol to http/protobuf or leave it unset")
	}
	return fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: pml exports OTLP over http/protobuf only; set it to http/protobuf or leave it unset", s.Protocol)
}

// Setup starts exporting traces when s asks for it, for the service
// version given; otherwise it does nothing and returns a no-op shutdown.
// The returned function flushes and stops the exporter, waiting at most
// ShutdownWait. An error means telemetry stays off; pml runs on.
func Setup(ctx context.Context, s Settings, version string) (shutdown func(), err error) {
	if !s.On() {
		return func() {}, nil
	}
	if err := s.Check(); err != nil {
		return func() {}, err
	}
	var opts []otlptracehttp.Option
	if s.FromConfig {
		opts = append(opts, otlptracehttp.WithEndpointURL(s.signalURL("/v1/traces")))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return func() {}, fmt.Errorf("the OTLP trace exporter: %w", err)
	}
	// pml's name and version first: OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES (WithFromEnv) override them.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("pml"), semconv.ServiceVersion(version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && res == nil {
		res = resource.Default()
	}
	// The sampler is OTEL_TRACES_SAMPLER's (the SDK reads it), by
	// default the parent's decision, else every trace.
	// (Not the SDK's batcher: ours takes an ended span without waking a
	// goroutine; batch.go.)
	bat := newEnvBatcher(exp)
	tp, mode := newProvider(os.Getenv, sdktrace.WithSpanProcessor(bat), sdktrace.WithResource(res))
	use(tp, version)
	deferring.Store(int32(mode))
	maker.Store(bat)
	return func() {
		enabled.Store(false)
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownWait)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}, nil
}

// newProvider makes the provider of pml's spans with opts: its sampler
// is OTEL_TRACES_SAMPLER's (the SDK's default when unset), and under the
// samplers whose decision pml can take itself, request spans are made
// when they end (pending.go), which mode says.
func newProvider(getenv func(string) string, opts ...sdktrace.TracerProviderOption) (*sdktrace.TracerProvider, deferMode) {
	sampler, mode := samplerFor(getenv("OTEL_TRACES_SAMPLER"))
	if sampler != nil {
		opts = append(opts, sdktrace.WithSampler(sampler), sdktrace.WithIDGenerator(ids{}))
	}
	return sdktrace.NewTracerProvider(opts...), mode
}

// UseProcessor makes a provider as Setup does, with sp its span
// processor and the sampler of the environment, and makes it the
// provider of pml's spans: for a test that records them as pml makes
// them. stop turns them off again.
func UseProcessor(sp sdktrace.SpanProcessor, version string) (stop func()) {
	tp, mode := newProvider(os.Getenv, sdktrace.WithSpanProcessor(sp))
	use(tp, version)
	deferring.Store(int32(mode))
	return func() { enabled.Store(false) }
}

// Use makes tp the provider of pml's spans and turns them on, as Setup
// does with its exporter: for a test that records spans in memory. stop
// turns them off again.
func Use(tp trace.TracerProvider, version string) (stop func()) {
	use(tp, version)
	return func() { enabled.Store(false) }
}

// use makes tp the provider of pml's spans and turns them on.
func use(tp trace.TracerProvider, version string) {
	// A provider made elsewhere may not take the ids a pending span
	// settled: its spans start at once.
	deferring.Store(int32(deferOff))
	maker.Store(nil)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(prop)
	t := tp.Tracer(ScopeName, trace.WithInstrumentationVersion(version))
	tracer.Store(&t)
	enabled.Store(true)
}

// noSpan is the span of every call while telemetry is off.
var noSpan = trace.SpanFromContext(context.Background())

// Start starts a span named name under the span in ctx (an internal
// span unless kind says otherwise). Off, it returns ctx and a span that
// does nothing.
func Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !enabled.Load() {
		return ctx, noSpan
	}
	t := tracer.Load()
	if t == nil {
		return ctx, noSpan
	}
	if len(attrs) == 0 {
		return (*t).Start(ctx, name, kindOption(kind))
	}
	return (*t).Start(ctx, name, kindOption(kind), trace.WithAttributes(attrs...))
}

// StartAt is Start for a span that began at began, before it was known
// to be worth a span (a wait that turned out to be one).
func StartAt(ctx context.Context, began time.Time, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !enabled.Load() {
		return ctx, noSpan
	}
	t := tracer.Load()
	if t == nil {
		return ctx, noSpan
	}
	return (*t).Start(ctx, name, kindOption(kind), trace.WithTimestamp(began), trace.WithAttributes(attrs...))
}

// kindOptions are the span kinds as start options, made once (an option
// made for each span is an allocation).
var kindOptions = [...]trace.SpanStartOption{
	trace.WithSpanKind(trace.SpanKindUnspecified),
	trace.WithSpanKind(trace.SpanKindInternal),
	trace.WithSpanKind(trace.SpanKindServer),
	trace.WithSpanKind(trace.SpanKindClient),
	trace.WithSpanKind(trace.SpanKindProducer),
	trace.WithSpanKind(trace.SpanKindConsumer),
}

func kindOption(k trace.SpanKind) trace.SpanStartOption {
	if int(k) >= 0 && int(k) < len(kindOptions) {
		return kindOptions[k]
	}
	return trace.WithSpanKind(k)
}

// Fail marks span as failed with errType (error.type), and the
// description for the status.
func Fail(span trace.Span, errType, description string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(semconv.ErrorTypeKey.String(errType))
	span.SetStatus(codes.Error, description)
}

// FromMeta returns ctx carrying the remote span context found in an MCP
// request's params._meta (traceparent, tracestate), so the server span
// continues the client's trace. Off, it returns ctx.
func FromMeta(ctx context.Context, meta map[string]any) context.Context {
	if !enabled.Load() || meta == nil {
		return ctx
	}
	return prop.Extract(ctx, metaCarrier(meta))
}

// ToMeta writes the span context of ctx into meta (traceparent,
// tracestate) for a request pml sends, so the server continues the
// trace. It returns meta, made when nil and there is something to write.
func ToMeta(ctx context.Context, meta map[string]any) map[string]any {
	if !enabled.Load() || !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	if meta == nil {
		meta = map[string]any{}
	}
	prop.Inject(ctx, metaCarrier(meta))
	return meta
}

// metaCarrier reads and writes the trace context keys of an MCP _meta
// object (propagation.TextMapCarrier). Only string values are read.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// FromMetaJSON is FromMeta for a _meta object as raw JSON (the stdio fast
// path forwards a call's bytes and decodes none of them): decoded only
// while traces are on, and only when there is one.
func FromMetaJSON(ctx context.Context, meta []byte) context.Context {
	if !enabled.Load() || !bytes.Contains(meta, traceparentKey) {
		// Most calls' _meta holds a progress token and no trace
		// context: not decoded (W3C trace context reads nothing
		// without a traceparent).
		return ctx
	}
	var m map[string]any
	if json.Unmarshal(meta, &m) != nil {
		return ctx
	}
	return FromMeta(ctx, m)
}

var traceparentKey = []byte(`"traceparent"`)

// ToMetaJSON is ToMeta for a _meta object as raw JSON (or nil): the span
// context of ctx replaces any traceparent and tracestate the object has,
// and the other members stay as they were written. Off, or with no span
// in ctx, meta is returned as it is; an object that does not decode too.
func ToMetaJSON(ctx context.Context, meta []byte) []byte {
	sc := trace.SpanContextFromContext(ctx)
	if !enabled.Load() || !sc.IsValid() {
		return meta
	}
	if len(bytes.TrimSpace(meta)) == 0 {
		// Most calls carry no _meta for the server: the object is
		// written directly.
		out := make([]byte, 0, 32+traceparentLen)
		return append(AppendTraceMembers(append(out, '{'), ctx), '}')
	}
	var c traceCarrier
	prop.Inject(ctx, &c)
	if c.parent == "" {
		return meta
	}
	members := map[string]json.RawMessage{}
	if json.Unmarshal(meta, &members) != nil {
		return meta
	}
	for _, k := range prop.Fields() {
		delete(members, k)
	}
	members["traceparent"], _ = json.Marshal(c.parent)
	if c.state != "" {
		members["tracestate"], _ = json.Marshal(c.state)
	}
	out, err := json.Marshal(members)
	if err != nil {
		return meta
	}
	return out
}

// AppendTraceMembers appends to b the members of a _meta object that
// carry the span context of ctx, "traceparent" and (when there is one)
// "tracestate", as W3C trace context has them (what prop.Inject writes,
// without its carrier and strings); nothing while traces are off or ctx
// holds no span. The stdio fast path writes them straight into the
// request it forwards.
func AppendTraceMembers(b []byte, ctx context.Context) []byte {
	sc := trace.SpanContextFromContext(ctx)
	if !enabled.Load() || !sc.IsValid() {
		return b
	}
	b = append(b, `"traceparent":"`...)
	b = appendTraceparent(b, sc)
	b = append(b, '"')
	if state := sc.TraceState().String(); state != "" {
		b = appendString(append(b, `,"tracestate":`...), state)
	}
	return b
}

// traceparentLen is the length of a version 00 traceparent.
const traceparentLen = 2 + 1 + 32 + 1 + 16 + 1 + 2

// appendTraceparent appends sc as a W3C traceparent (version 00): the
// trace id, the span id, and the sampled flag.
func appendTraceparent(b []byte, sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	if sc.IsSampled() {
		return append(b, "-01"...)
	}
	return append(b, "-00"...)
}

// traceCarrier takes the two keys W3C trace context writes
// (propagation.TextMapCarrier), without a map.
type traceCarrier struct{ parent, state string }

func (c *traceCarrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.parent
	case "tracestate":
		return c.state
	}
	return ""
}

func (c *traceCarrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.parent = value
	case "tracestate":
		c.state = value
	}
}

func (c *traceCarrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// appendString appends s as a JSON string. (Trace context values are
// printable ASCII; a quote, a backslash and control bytes are escaped
// all the same.)
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// eventKey is what an event of two string attributes is made of.
type eventKey struct{ name, k1, v1, k2, v2 string }

// eventOptions holds the options of the events calls add (the
// permission's decision on every call), built once per kind: an event's
// option made on each call is two allocations more, and the list of
// options one more.
var eventOptions memo[eventKey, []trace.EventOption]

// AddEvent adds the event name with the attributes k1=v1 and k2=v2 to
// span, if it records.
func AddEvent(span trace.Span, name, k1, v1, k2, v2 string) {
	if p, ok := span.(*pendingSpan); ok {
		p.addEvent(eventKey{name, k1, v1, k2, v2})
		return
	}
	if !span.IsRecording() {
		return
	}
	span.AddEvent(name, eventOptionsOf(eventKey{name, k1, v1, k2, v2})...)
}

func eventOptionsOf(k eventKey) []trace.EventOption {
	return eventOptions.get(k, func(k eventKey) []trace.EventOption {
		return []trace.EventOption{trace.WithAttributes(attribute.String(k.k1, k.v1), attribute.String(k.k2, k.v2))}
	})
}
