// Command pml-inside is the program pml runs inside its containers: the
// toolbox agent, the stdio shim of pooled servers, and PID 1 of shell and
// Deno containers. It is a small static Linux program, built for amd64 and
// arm64 and embedded in every pml (internal/inside), so that pml on any
// host builds the toolbox image for the daemon's architecture without a
// registry or a Linux machine.
//
// It only dispatches: what each part does lives in its package
// (internal/toolbox, internal/shim, internal/supervise,
// internal/egress/inside). It imports no
// logging, CLI or engine library, to stay small.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/pml-dev/pml/internal/egress/box"
	egress "github.com/pml-dev/pml/internal/egress/inside"
	"github.com/pml-dev/pml/internal/shim"
	"github.com/pml-dev/pml/internal/supervise"
	"github.com/pml-dev/pml/internal/toolbox"
)

// version is set with -ldflags "-X main.version=..." (tests use it to
// build a program of distinct content); pml's toolbox tag is the
// program's digest.
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintf(os.Stderr, "pml-inside %s\n%s\n", version, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case toolbox.Subcommand:
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := toolbox.Serve(ctx, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "pml-inside:", err)
			return 1
		}
		return 0
	case shim.Subcommand:
		return runShim(rest)
	case supervise.Subcommand:
		// --egress SPEC (sandbox.network): the egress listener runs in
		// the supervisor, beside the command.
		spec, extra := egress.SplitArgs(rest)
		if len(extra) > 0 {
			fmt.Fprintln(os.Stderr, "usage: pml-inside "+supervise.Subcommand+" [--egress SPEC]")
			return 2
		}
		if spec != "" && startEgress(spec) != nil {
			return supervise.ExitBadRequest
		}
		return supervise.Shell(os.Stdin, os.Stdout, os.Stderr)
	case egress.RunSubcommand:
		// An install container (no shim, no supervisor): the listener
		// beside the install command.
		if len(rest) < 3 || rest[1] != "--" {
			fmt.Fprintln(os.Stderr, "usage: pml-inside "+egress.RunSubcommand+" SPEC -- COMMAND [ARG...]")
			return 2
		}
		return egress.Run(rest[0], rest[2:])
	case box.Subcommand:
		// pml's egress container (an engine not on pml's machine):
		// pml's messages on stdin, its reports on stdout.
		if err := box.Serve(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "pml-inside:", err)
			return 1
		}
		return 0
	case supervise.LinkSubcommand:
		deadline, argv, err := supervise.ParseLink(rest)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pml-inside:", err)
			return 2
		}
		return supervise.Link(deadline, argv, os.Stdin, os.Stdout, os.Stderr)
	}
	fmt.Fprintf(os.Stderr, "pml-inside %s: unknown command %q\n%s\n", version, cmd, usage)
	return 2
}

const usage = "usage: pml-inside " + toolbox.Subcommand + " | " + shim.Subcommand + " SOCKET [--standby DURATION] [--egress SPEC] -- COMMAND [ARG...] | " +
	supervise.Subcommand + " [--egress SPEC] | " + supervise.LinkSubcommand + " DEADLINE_MS -- COMMAND [ARG...] | " +
	egress.RunSubcommand + " SPEC -- COMMAND [ARG...] | " + box.Subcommand + "\n" +
	"(it runs inside pml's containers; pml starts it)"

// runShim connects to pml's socket and becomes the server (shim.Exec
// returns only on failure). With --egress it first opens the container's
// egress listener, which the shim, staying PID 1, serves beside the
// server.
func runShim(args []string) int {
	var spec string
	var rest []string
	var standby time.Duration
	pipes := false
	if len(args) > 0 {
		rest = args[1:]
		if len(rest) > 0 && rest[0] == shim.PipesFlag {
			pipes, rest = true, rest[1:]
		}
		if len(rest) >= 2 && rest[0] == shim.StandbyFlag {
			d, err := time.ParseDuration(rest[1])
			if err != nil || d <= 0 {
				fmt.Fprintln(os.Stderr, "pml-inside: "+shim.StandbyFlag+" takes a positive duration")
				return 2
			}
			standby, rest = d, rest[2:]
		}
		spec, rest = egress.SplitArgs(rest)
	}
	if len(rest) < 2 || rest[0] != "--" {
		fmt.Fprintln(os.Stderr, "usage: pml-inside "+shim.Subcommand+" SOCKET ["+shim.PipesFlag+"] ["+shim.StandbyFlag+" DURATION] [--egress SPEC] -- COMMAND [ARG...]")
		return 2
	}
	if spec != "" && startEgress(spec) != nil {
		return 126
	}
	var err error
	if standby > 0 {
		// Nothing of the server runs before a pml claims it.
		err = shim.ExecStandby(args[0], standby, pipes, rest[1:])
		if errors.Is(err, shim.ErrStandbyExpired) {
			return shim.ExitStandbyExpired
		}
	} else {
		err = shim.Exec(args[0], pipes, rest[1:])
	}
	fmt.Fprintln(os.Stderr, "pml-inside:", err)
	var nc *shim.NoConnectionError
	switch {
	case errors.As(err, &nc):
		return shim.ExitNoConnection
	case errors.Is(err, exec.ErrNotFound):
		// What a shell answers for a missing command.
		return 127
	}
	return 126
}

// startEgress opens the in-container egress listener of spec.
func startEgress(spec string) error {
	s, err := egress.Parse(spec)
	if err == nil {
		err = egress.Start(s)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pml-inside:", err)
	}
	return err
}
