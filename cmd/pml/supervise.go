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

// newLinkSuperviseCmd is PID 1 of a container whose program talks to pml
// over its stdin (the Deno runner): it ends the program at its deadline,
// or once pml's end of stdin is gone (internal/supervise.Link).
func newLinkSuperviseCmd() *cobra.Command {
	return &cobra.Command{
		Use:                supervise.LinkSubcommand + " DEADLINE_MS -- COMMAND [ARG...]",
		Short:              "Run a program that talks to pml over stdin, ending with pml (inside a pml container)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			deadline, argv, err := supervise.ParseLink(args)
			if err != nil {
				return err
			}
			if code := supervise.Link(deadline, argv, os.Stdin, os.Stdout, os.Stderr); code != 0 {
				os.Exit(code)
			}
			return nil
		},
	}
}
