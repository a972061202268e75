package main

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/docker"
)

// The broker owns the install path (approval, policy, integrity check),
// so `pml images pull` pre-installs dependencies through one.
func init() {
	preinstaller = func(ctx context.Context, ws string, cfg *config.Config, rt *docker.Runtime, log zerolog.Logger) (images.DepsInstaller, func(), error) {
		b, err := broker.New(broker.Options{Workspace: ws, Config: cfg, Runtime: rt, Inside: insideSource(rt).Program, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return b, func() { b.Close(30 * time.Second) }, nil
	}
}
