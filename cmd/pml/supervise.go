package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/internal/egress/inside"
	"github.com/pml-dev/pml/internal/supervise"
)

// newSuperviseCmd is PID 1 of a shell:exec container (internal/supervise):
// it runs the command it is sent and ends the container at the deadline
// it is given, whatever happened to pml.
func newSuperviseCmd() *cobra.Command {
	return &cobra.Command{
		Use:    supervise.Subcommand + " [--egress SPEC]",
		Short:  "Run one shell:exec request under a deadline (inside a pml container)",
		Hidden: true,
		// --egress SPEC (sandbox.network): the egress listener runs in
		// the supervisor, beside the command (internal/egress/inside).
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, rest := inside.SplitArgs(args)
			if len(rest) > 0 {
				return &exitError{2, errors.New("usage: pml " + supervise.Subcommand + " [--egress SPEC]")}
			}
			if spec != "" {
				if err := startEgress(spec); err != nil {
					os.Exit(supervise.ExitBadRequest)
				}
			}
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
