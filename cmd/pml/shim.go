package main

import (
	"errors"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/internal/shim"
)

// newShimCmd is the entrypoint of a pooled server's container on the
// direct stdio path (internal/shim): connect to pml's socket, put it on
// stdin and stdout, and become the server.
func newShimCmd() *cobra.Command {
	return &cobra.Command{
		Use:   shim.Subcommand + " SOCKET -- COMMAND [ARG...]",
		Short: "Run an MCP server with its stdio on pml's socket (inside a pml container)",
		// Everything after -- is the server's command line, flags and all.
		DisableFlagParsing: true,
		Hidden:             true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) < 3 || args[1] != "--" {
				return &exitError{2, errors.New("usage: pml " + shim.Subcommand + " SOCKET -- COMMAND [ARG...]")}
			}
			err := shim.Exec(args[0], args[2:])
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
