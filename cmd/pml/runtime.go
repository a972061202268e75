package main

import (
	"os"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/internal/kubernetes"
)

// newRuntime builds the container runtime the configuration names
// ("runtime" in .pml.json, PML_RUNTIME): Docker by default, or a
// Kubernetes cluster. cfg may be nil (before the configuration is read):
// PML_RUNTIME alone then decides.
func newRuntime(cfg *config.Config, log zerolog.Logger) (container.Runtime, error) {
	choice := os.Getenv("PML_RUNTIME")
	if cfg != nil {
		choice = cfg.Runtime
	}
	if choice != config.RuntimeKubernetes {
		return docker.New()
	}
	o := kubernetes.Options{Namespace: os.Getenv(kubernetes.NamespaceEnv), Logger: log, ProbeImage: config.DefaultShellImage}
	if cfg != nil {
		o.Namespace = cfg.Kubernetes.Namespace
		o.AllowUnverifiedNetwork = cfg.Kubernetes.UnverifiedNetwork
		o.ProbeImage = cfg.Sandbox.ShellImage
	} else {
		o.AllowUnverifiedNetwork = os.Getenv(kubernetes.UnverifiedNetworkEnv) == "1"
	}
	return kubernetes.New(o)
}
