package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/engine"
)

// Exit codes of pml call. callExits is the one table: the help text, the
// JSON "outcome" and the process exit code all come from it.
const (
	exitOK          = 0
	exitToolError   = 1
	exitUsage       = 2
	exitApproval    = 3
	exitDenied      = 4
	exitUnavailable = 5
	exitCloud       = 6
	exitTimeout     = 124 // as timeout(1)
	exitInterrupted = 130 // 128 + SIGINT, as shells report it
)

var callExits = []struct {
	code    int
	outcome string
	meaning string
}{
	{exitOK, "ok", "the tool ran and succeeded"},
	{exitToolError, "tool_error", "the tool ran and failed (is_error: true), e.g. a missing file or a command that exited non-zero"},
	{exitUsage, "usage_error", "bad ARGS (not a JSON object), unknown flag or tool, invalid .pml.json, input refused before running (a path outside the workspace, an answer to an approval, which pml call cannot give), a Docker configuration pml cannot use (bad config.json, missing context, bad --host)"},
	{exitApproval, "approval_required", "the call needs approval: nothing ran (for a network approval, the tool ran and a connection it tried was refused); stderr says what to allow and where"},
	{exitDenied, "denied", "a permissions.deny pattern matched"},
	{exitUnavailable, "unavailable", "the container engine is not available: no daemon, permission denied on its socket (join its group), a missing image that could not be pulled, a workspace the engine cannot mount (a VM or remote daemon); or a registry a tool must be fetched from cannot be reached; or the workspace's audit log cannot be written (the call was not run)"},
	{exitCloud, "cloud_unavailable", "a cloud tool could not be forwarded: no PML_API_KEY, cloud unreachable, key refused"},
	{exitTimeout, "timeout", "--timeout expired: the call was stopped (the text says what became of its container)"},
	{exitInterrupted, "interrupted", "Ctrl-C or SIGTERM: the call was stopped (the text says what became of its container)"},
}

func outcomeOf(code int) string {
	for _, e := range callExits {
		if e.code == code {
			return e.outcome
		}
	}
	return "error"
}

func exitTable() string {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, e := range callExits {
		fmt.Fprintf(tw, "  %d\t%s\t%s\n", e.code, e.outcome, e.meaning)
	}
	tw.Flush()
	return b.String()
}

// failureExits is the one place a failure becomes an exit code: the first
// row whose error errors.Is finds in the chain wins, and a failure none
// matches is a tool error (exit 1). The rows are what the broker decided
// about the call (its sentinels, each of an errdefs kind); the causes
// beneath them — a runtime's not-found behind a failed run — describe
// the cause, not the call, and do not choose the code. The runtime's own
// unavailability is last: it is what `pml images` (and a call the broker
// did not classify) reports when the daemon does not answer.
var failureExits = []struct {
	err  error
	code int
}{
	{call.ErrDenied, exitDenied},
	{call.ErrNotTrusted, exitApproval},
	{call.ErrUnavailable, exitUnavailable},
	{tl.ErrCloud, exitCloud},
	{call.ErrNotFound, exitUsage},
	{call.ErrInvalidInput, exitUsage},
	{container.ErrUnavailable, exitUnavailable},
	{engine.ErrNotShared, exitUnavailable},
	{engine.ErrConfig, exitUsage},
}

// exitCodeFor maps a failure to its exit code (see failureExits); nil is
// a tool's own error.
func exitCodeFor(err error) int {
	for _, row := range failureExits {
		if err != nil && errors.Is(err, row.err) {
			return row.code
		}
	}
	return exitToolError
}

// usageError makes err a usage error of cmd: exit 2, with the hint that
// says where the usage is. An error that already carries an exit code
// (pml call prints its JSON line for its own) is left as it is.
func usageError(cmd *cobra.Command, err error) error {
	var ee *exitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	//lint:ignore ST1005 the usage hint is the last sentence a person reads, as cobra prints it
	return &exitError{exitUsage, fmt.Errorf("%w\nRun '%s --help' for usage.", err, cmd.CommandPath())}
}

// markUsage makes every usage error of the tree under cmd exit 2: flag
// errors (cobra takes the nearest FlagErrorFunc, so commands that set
// their own keep it), argument validators, and unknown subcommands of a
// command group. cobra prints a group's help and exits 0 for an unknown
// subcommand below the root; a group is given a RunE that shows its help
// when called bare and an Args that refuses anything else.
func markUsage(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError(c, err) })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() {
			if v := c.Args; v != nil {
				c.Args = func(c *cobra.Command, args []string) error { return usageError(c, v(c, args)) }
			}
		} else if c.HasSubCommands() {
			c.Args = func(c *cobra.Command, args []string) error {
				if len(args) == 0 {
					return nil
				}
				msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
				if c.SuggestionsMinimumDistance <= 0 {
					c.SuggestionsMinimumDistance = 2 // cobra's own default
				}
				if s := c.SuggestionsFor(args[0]); len(s) > 0 {
					msg += "; did you mean " + strings.Join(s, " or ") + "?"
				}
				return usageError(c, errors.New(msg))
			}
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd)
}
