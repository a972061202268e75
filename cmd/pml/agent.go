package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/internal/toolbox"
)

// newAgentCmd is the entry point inside the toolbox container: one request
// on stdin, one answer on stdout.
func newAgentCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "toolbox-agent",
		Short:  "Run one toolbox request (inside a pml container)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return toolbox.Serve(cmd.Context(), os.Stdin, os.Stdout)
		},
	}
}
