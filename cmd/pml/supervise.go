package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/internal/supervise"
)

// newSuperviseCmd is PID 1 of a shell:exec container (internal/supervise):
// it runs the command it is sent and ends the container at the deadline
// it is given, whatever happened to pml.
func newSuperviseCmd() *cobra.Command {
	return &cobra.Command{
		Use:    supervise.Subcommand,
		Short:  "Run one shell:exec request under a deadline (inside a pml container)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if code := supervise.Shell(os.Stdin, os.Stdout, os.Stderr); code != 0 {
				os.Exit(code)
			}
			return nil
		},
	}
}
