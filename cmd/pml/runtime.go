package main

import (
	"os"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/kubernetes"
)

// newRuntime builds the container runtime the configuration names
// ("runtime" in .pml.json, PML_RUNTIME): Docker by default, or a
// Kubernetes cluster. cfg may be nil (before the configuration is read):
// PML_RUNTIME alone then decides. host is --host (the Docker engine's
// address; "" when not given). Errors carry their exit code.
func newRuntime(host string, cfg *config.Config, log zerolog.Logger) (container.Runtime, error) {
	choice := os.Getenv("PML_RUNTIME")
	if cfg != nil {
		choice = cfg.Runtime
	}
	if choice != config.RuntimeKubernetes {
		return openRuntime(host, cfg)
	}
	o := kubernetes.Options{Namespace: os.Getenv(kubernetes.NamespaceEnv), Logger: log, ProbeImage: config.DefaultShellImage}
	if cfg != nil {
		o.Namespace = cfg.Kubernetes.Namespace
		o.AllowUnverifiedNetwork = cfg.Kubernetes.UnverifiedNetwork
		o.ProbeImage = cfg.Sandbox.ShellImage
	} else {
		o.AllowUnverifiedNetwork = os.Getenv(kubernetes.UnverifiedNetworkEnv) == "1"
	}
	rt, err := kubernetes.New(o)
	if err != nil {
		return nil, &exitError{exitUnavailable, err}
	}
	return rt, nil
}
