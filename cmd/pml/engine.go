package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/internal/engine"
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
