package main

import (
	"context"
	"net/http"
	"os"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/telemetry"
)

// stopTelemetry flushes the spans and metrics of a command that started
// telemetry (setup); main calls it before exiting.
var stopTelemetry = func() {}

// servePrometheus is set by pml serve, which serves the metrics on
// /metrics; metricsHandler is then the handler.
var (
	servePrometheus bool
	metricsHandler  http.Handler
)

// startTelemetry turns traces and metrics on when the OTEL_* variables
// ask for them (internal/telemetry), and the Prometheus metrics of pml
// serve; .pml.json's telemetry.endpoint (once trusted) when no variable
// names an endpoint. Settings pml cannot use are a warning, never fatal: the tools
// work without telemetry.
func startTelemetry(log zerolog.Logger, configEndpoint string) {
	s := telemetry.FromEnv(os.Getenv).WithConfig(configEndpoint)
	if !s.On() && !servePrometheus {
		return
	}
	var stops []func()
	if s.On() {
		stop, err := telemetry.Setup(context.Background(), s, version)
		if err != nil {
			log.Warn().Err(err).Msg("traces and metrics over OTLP are off")
			s = telemetry.Settings{ExemplarFilter: s.ExemplarFilter}
		} else {
			stops = append(stops, stop)
			log.Debug().Str("endpoint", s.Endpoint).Msg("exporting traces and metrics over OTLP")
		}
	}
	h, stop, err := telemetry.MetricsSetup(context.Background(), s, version, servePrometheus)
	if err != nil {
		log.Warn().Err(err).Msg("metrics are off")
	} else {
		stops = append(stops, stop)
		metricsHandler = h
	}
	stopTelemetry = func() {
		for _, f := range stops {
			f()
		}
	}
}
