package main

import (
	"context"
	"errors"
	"os"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/internal/engine"
	"github.com/pml-dev/pml/internal/inside"
	"github.com/pml-dev/pml/internal/kubernetes"
)

// hostFlag is the global --host (-H, as docker's): the engine address,
// above DOCKER_HOST and Docker contexts. It is global so that a client
// that spawns pml (`pml stdio --host unix:///...` in .mcp.json) can name
// the engine without changing pml's environment.
const hostFlag = "host"

// openRuntime connects to the engine chosen as docker would (see
// internal/engine), with --host first. cfg may be nil (no workspace
// settings: a VM's default shares). The error carries its exit code: a
// Docker configuration pml cannot use (a config.json that does not parse,
// a context that does not exist, a bad --host) is 2, anything else 5.
func openRuntime(host string, cfg *config.Config) (*docker.Runtime, error) {
	var shared []string
	if cfg != nil {
		shared = cfg.Sandbox.SharedPaths
	}
	rt, err := docker.OpenHost(host, docker.Options{SharedPaths: shared})
	if err == nil {
		return rt, nil
	}
	if errors.Is(err, engine.ErrConfig) {
		return nil, &exitError{exitUsage, err}
	}
	return nil, &exitError{exitUnavailable, err}
}

// hostOf is --host as given to cmd ("" when not given), for commands that
// have no globals.
func hostOf(cmd *cobra.Command) string {
	h, _ := cmd.Flags().GetString(hostFlag)
	return h
}

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

// insideSource is pml's in-container program (cmd/pml-inside, embedded in
// this pml) for rt's daemon: the toolbox image, the stdio shim and the
// supervisors all come from it, never from this executable.
func insideSource(rt *docker.Runtime) *inside.Source { return inside.NewSource(rt) }

// shimProgram adapts src to what the direct stdio path asks for.
func shimProgram(src *inside.Source) func(context.Context) (string, string, error) {
	return func(ctx context.Context) (string, string, error) {
		p, err := src.Program(ctx)
		return p.Path, p.Arch, err
	}
}

// localShimProgram is src's program for this machine's own architecture,
// known without asking the engine (docker.Runtime.UseLocalProgram).
func localShimProgram(src *inside.Source) func() (string, string, error) {
	return func() (string, string, error) {
		p, err := src.Local()
		return p.Path, p.Arch, err
	}
}
