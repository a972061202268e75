package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/internal/egress/inside"
	"github.com/pml-dev/pml/internal/shim"
)

// newShimCmd is the entrypoint of a pooled server's container on the
// direct stdio path (internal/shim): connect to pml's socket, put it on
// stdin and stdout, and become the server. With --egress it first opens
// the container's egress listener (internal/egress/inside), which the
// shim, staying as PID 1, serves beside the server.
func newShimCmd() *cobra.Command {
	return &cobra.Command{
		Use:   shim.Subcommand + " SOCKET [--egress SPEC] -- COMMAND [ARG...]",
		Short: "Run an MCP server with its stdio on pml's socket (inside a pml container)",
		// Everything after -- is the server's command line, flags and all.
		DisableFlagParsing: true,
		Hidden:             true,
		RunE: func(cmd *cobra.Command, args []string) error {
			usage := &exitError{2, errors.New("usage: pml " + shim.Subcommand + " SOCKET [--egress SPEC] -- COMMAND [ARG...]")}
			if len(args) < 1 {
				return usage
			}
			socket := args[0]
			spec, rest := inside.SplitArgs(args[1:])
			if len(rest) < 2 || rest[0] != "--" {
				return usage
			}
			if spec != "" {
				if err := startEgress(spec); err != nil {
					return &exitError{126, err}
				}
			}
			err := shim.Exec(socket, rest[1:])
			var nc *shim.NoConnectionError
			switch {
			case errors.As(err, &nc):
				return &exitError{shim.ExitNoConnection, err}
			case errors.Is(err, exec.ErrNotFound):
				// What a shell answers for a missing command.
				return &exitError{127, err}
			}
			return &exitError{126, err}
		},
	}
}

// startEgress opens the in-container egress listener of spec.
func startEgress(spec string) error {
	s, err := inside.Parse(spec)
	if err == nil {
		err = inside.Start(s)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pml:", err)
	}
	return err
}

// newEgressRunCmd runs a command with the egress listener beside it
// (install containers, which have neither shim nor supervisor).
func newEgressRunCmd() *cobra.Command {
	return &cobra.Command{
		Use:                inside.RunSubcommand + " SPEC -- COMMAND [ARG...]",
		Short:              "Run a command with pml's egress listener beside it (inside a pml container)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) < 3 || args[1] != "--" {
				return &exitError{2, errors.New("usage: pml " + inside.RunSubcommand + " SPEC -- COMMAND [ARG...]")}
			}
			os.Exit(inside.Run(args[0], args[2:]))
			return nil
		},
	}
}
