package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/internal/safefs"
)

// lockJSON is pml lock --format json.
type lockJSON struct {
	// Check is true with --check; OK is false when an entry drifted.
	Check   bool        `json:"check"`
	OK      bool        `json:"ok"`
	Entries []lockEntry `json:"entries"`
}

// pml lock shows the npm versions pml resolved and recorded
// (.pml/deps.json); --check is the CI gate on them (issue 43: an
// unpinned package is resolved once, and drift fails). The check is
// pml doctor's deps check (doctor_deps.go), one line per drift.
func newLockCmd(g *globals) *cobra.Command {
	var (
		check  bool
		format string
	)
	cmd := &cobra.Command{
		Use:   "lock [--check]",
		Short: "Show (or, with --check, verify) the npm versions recorded in .pml/deps.json",
		Long: "List every npm package .pml/deps.json records with its version and integrity: an unpinned\n" +
			"package (the seeds' `npx -y @scope/server`, a range, a dist-tag) is resolved at its first install\n" +
			"and recorded there, and every later install uses that version. Each is shown with its state:\n" +
			"ok (installed in .pml/deps as recorded), not_installed (installed at that version on first use)\n" +
			"or drift (.pml/deps holds another version or integrity than the record).\n" +
			"--check prints one line per drift, naming the server and what to run, and exits 1: run it in CI.\n" +
			"--format json prints one JSON object: {\"check\", \"ok\", \"entries\": [{\"server\", \"package\",\n" +
			"\"version\", \"integrity\", \"state\", \"installed_version\", \"installed_integrity\", \"error\"}]}.\n\n" +
			"Exit codes: 0 every entry as recorded (or, without --check, listed), 1 a drift (--check only),\n" +
			"2 a usage error or .pml/deps.json cannot be read.",
		Example: "  pml lock            # the recorded versions and their state\n" +
			"  pml lock --check    # in CI: exit 1 when what is installed differs from the record",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := outputFormat(cmd, format, false)
			if err != nil {
				return err
			}
			_, ws, err := g.workspace()
			if err != nil {
				return err
			}
			if err := safefs.CheckStateDir(ws.Dir); err != nil {
				return &exitError{2, err}
			}
			// What a killed add (or first call) left mid-install goes
			// first, as pml add does (issue 51): it is no install to list.
			if _, err := clearInterrupted(g, ws.Dir, g.narration()); err != nil {
				return &exitError{1, err}
			}
			entries, err := lockEntries(cmd.Context(), ws.Dir)
			if err != nil {
				return &exitError{2, fmt.Errorf("%w; delete .pml/deps.json to install again", err)}
			}
			var drift []lockEntry
			for _, e := range entries {
				if e.State == lockDrift {
					drift = append(drift, e)
				}
			}
			out := cmd.OutOrStdout()
			if f == formatJSON {
				if err := writeJSON(out, lockJSON{Check: check, OK: len(drift) == 0, Entries: entries}); err != nil {
					return err
				}
			} else if check {
				printDrift(out, entries, drift)
			} else {
				printLock(out, entries)
			}
			if check && len(drift) > 0 {
				return &exitError{1, fmt.Errorf("%d npm package(s) installed otherwise than .pml/deps.json records", len(drift))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&check, "check", false, "exit 1, one line per drift, when an installed package differs from its record (for CI)")
	addFormatFlag(cmd, &format, nil)
	return cmd
}

// printDrift is --check's table output: one line per drift, or one line
// saying there is none.
func printDrift(w io.Writer, entries, drift []lockEntry) {
	if len(drift) == 0 {
		fmt.Fprintf(w, "%d npm package(s) recorded in .pml/deps.json, none installed otherwise\n", len(entries))
		return
	}
	for _, e := range drift {
		fmt.Fprintf(w, "drift: %s; %s\n", e.driftText(), driftFix(e.Server))
	}
}

// printLock is the table of the recorded entries.
func printLock(w io.Writer, entries []lockEntry) {
	if len(entries) == 0 {
		fmt.Fprintln(w, "No npm package is recorded with its version in .pml/deps.json (it is recorded at a server's first install).")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tPACKAGE\tVERSION\tINTEGRITY\tSTATE")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Server, e.Package, e.Version, e.Integrity, e.State)
	}
	tw.Flush()
}
