package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
)

func newCleanupCmd(g *globals) *cobra.Command {
	var (
		dryRun bool
		format string
	)
	cmd := &cobra.Command{
		Use:   "cleanup [--dry-run]",
		Short: "Delete installed dependencies and cached tool lists that no server here uses any more",
		Long: "Delete what servers left in .pml/ that neither .pml.json (mcps, private_mcps), an added capability\n" +
			"(.pml/capabilities.json) nor the registry lockfile (.pml/mcp.lock) names any more: installed\n" +
			"dependencies (.pml/deps/NAME and their records in .pml/deps.json) and cached tool lists\n" +
			"(.pml/tools-cache.json); and what an install interrupted by a kill left (.pml/deps/.partial-*,\n" +
			"never a running install's). It also removes, from the container engine, the containers and\n" +
			"networks (pml's egress container's) of a pml on this host that exited without removing them,\n" +
			"and the standby containers no session has claimed (sandbox.standby).\n" +
			"--dry-run lists the files (on stdout) and deletes nothing.\n" +
			"--format json prints one JSON object: {\"dry_run\", \"deleted\": [{\"server\", \"kind\", \"path\"}],\n" +
			"\"interrupted\": [paths]} (with --dry-run, what would be deleted).\n\n" +
			"Exit codes: 0 done (or nothing to do), 1 failed, 2 the configuration cannot be read.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (rerr error) {
			f, err := outputFormat(cmd, format, false)
			if err != nil {
				return err
			}
			_, ws, _, err := g.project()
			if err != nil {
				return err
			}
			// What the file names counts as used, trusted or not: a policy
			// waiting for pml trust still means its servers.
			left, err := tl.Unreferenced(ws.Dir, g.rawCfg)
			if err != nil {
				return &exitError{2, err}
			}
			out := cmd.OutOrStdout()
			rep := cleanupJSON{DryRun: dryRun, Deleted: []leftoverJSON{}, Interrupted: []string{}}
			if f == formatJSON {
				out = io.Discard
				defer func() {
					if rerr == nil {
						_ = writeJSON(cmd.OutOrStdout(), rep)
					}
				}()
			}
			// What a killed pml add (or first call) left mid-install:
			// never a running install's.
			var interrupted []deps.Interrupted
			if !dryRun {
				// What a pml that exited abnormally left on the engine:
				// its containers (pml's egress container among them) and
				// the egress container's networks.
				n, standbys := reapForCleanup(g)
				if n > 0 {
					fmt.Fprintf(out, "removed %d container(s) left by a pml that exited, with their networks\n", n)
				}
				if standbys > 0 {
					fmt.Fprintf(out, "removed %d standby container(s) that no session had claimed (sandbox.standby)\n", standbys)
				}
			}
			if dryRun {
				if interrupted, err = deps.NewStore(ws.Dir).ClearInterrupted(true, nil); err != nil {
					return &exitError{1, err}
				}
			} else {
				cleared, err := clearInterruptedList(g, ws.Dir, out)
				rep.Interrupted = relPaths(ws.Dir, cleared)
				if err != nil {
					return &exitError{1, err}
				}
				n := len(cleared)
				if n > 0 && len(left) == 0 {
					fmt.Fprintln(g.narration(), "cleanup done")
					return nil
				}
			}
			if len(left) == 0 && len(interrupted) == 0 {
				fmt.Fprintln(out, "Nothing to clean up: every installed dependency and cached tool list belongs to a server here.")
				return nil
			}
			rep.Interrupted = append(rep.Interrupted, relPaths(ws.Dir, interrupted)...)
			rep.Deleted = leftoversJSON(left)
			if dryRun {
				describeLeftovers(out, "pml cleanup would delete:", left)
				for _, c := range interrupted {
					fmt.Fprintf(out, "  an interrupted install's leftovers: %s\n", relToWorkspace(ws.Dir, c.Path))
				}
				return nil
			}
			if err := tl.RemoveLeftovers(ws.Dir, left); err != nil {
				return &exitError{1, err}
			}
			describeLeftovers(out, "Deleted:", left)
			fmt.Fprintln(g.narration(), "cleanup done")
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be deleted, delete nothing")
	addFormatFlag(cmd, &format, nil)
	return cmd
}

// reapForCleanup removes the containers and networks of pml processes of
// this host that died (container.Reap), and this host's standby
// containers that no session claimed; bounded: an engine that does not
// answer leaves them for the next pml start, which reaps the first, and
// to their own time (sandbox.standby), which ends the others.
func reapForCleanup(g *globals) (reaped, standbys int) {
	log := g.logger()
	rt, err := newRuntime(g.host, nil, log)
	if err != nil {
		return 0, 0
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reaped, err = container.Reap(ctx, rt, container.Self())
	if err != nil {
		log.Debug().Err(err).Msg("pml cleanup: the containers of a pml that exited were not looked for")
	}
	standbys, err = container.RemoveStandbys(ctx, rt)
	if err != nil {
		log.Debug().Err(err).Msg("pml cleanup: the standby containers were not looked for")
	}
	return reaped, standbys
}
