package main

import (
	"context"
	"os"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/telemetry"
)

// stopTelemetry flushes the spans of a command that started telemetry
// (setup); main calls it before exiting.
var stopTelemetry = func() {}

// startTelemetry turns traces on when the OTEL_* variables ask for them
// (internal/telemetry). Settings pml cannot use are a warning, never
// fatal: the tools work without traces.
func startTelemetry(log zerolog.Logger) {
	s := telemetry.FromEnv(os.Getenv)
	if !s.On() {
		return
	}
	stop, err := telemetry.Setup(context.Background(), s, version)
	if err != nil {
		log.Warn().Err(err).Msg("traces are off")
		return
	}
	stopTelemetry = stop
	log.Debug().Str("endpoint", s.Endpoint).Msg("exporting traces over OTLP")
}
