package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/cmd/pml/internal/doctor"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/safefs"
)

// lockJSON is pml lock --format json.
type lockJSON struct {
	// Check is true with --check; OK is false when an entry drifted or a
	// record is unvouched.
	Check   bool               `json:"check"`
	OK      bool               `json:"ok"`
	Entries []doctor.LockEntry `json:"entries"`
	// Unvouched are the other records of .pml/ (the registry lockfile,
	// its cache, the added capabilities) this user's pml did not write
	// in this workspace: each is ignored (unvouched.go).
	Unvouched []string `json:"unvouched"`
	// Pins are the registry entries .pml/mcp.lock pins (capabilities),
	// each checked against its cached copy.
	Pins []registry.Pin `json:"pins"`
}

// pml lock shows the npm versions pml resolved and recorded
// (.pml/deps.json); --check is the CI gate on them (issue 43: an
// unpinned package is resolved once, and drift fails). The check is
// pml doctor's deps check (internal/doctor/deps.go), one line per drift.
func newLockCmd(g *globals) *cobra.Command {
	var (
		check  bool
		format string
	)
	cmd := &cobra.Command{
		Use:   "lock [--check]",
		Short: "Show (or, with --check, verify) the npm versions in .pml/deps.json and the capabilities pinned in .pml/mcp.lock",
		Long: "List every npm package .pml/deps.json records with its version and integrity (and every Python server\n" +
			"with the distributions its first install locked, each by sha256: \"distributions\" in JSON): an unpinned\n" +
			"package (the seeds' `npx -y @scope/server`, a range, a dist-tag) is resolved at its first install\n" +
			"and recorded there, and every later install uses that version. Each is shown with its state:\n" +
			"ok (installed in .pml/deps as recorded), not_installed (installed at that version on first use)\n" +
			"drift (.pml/deps holds another version, integrity or files than the record) or unvouched (the record\n" +
			"was not written by this user's pml in this workspace: a repository's or an older pml's; the server is\n" +
			"installed again at its next use).\n" +
			"The records of the registry lockfile (.pml/mcp.lock), its cache (.pml/registry-cache) and the added\n" +
			"capabilities (.pml/capabilities.json) this user's pml did not write in this workspace are listed too.\n" +
			"Then every registry entry (capability) .pml/mcp.lock pins, checked against its cached copy in\n" +
			".pml/registry-cache, which pml runs it from: ok, drift (the copy is another version, or its code or\n" +
			"metadata does not hash to the pinned integrity) or missing (no cached copy).\n" +
			"--check prints one line per drift, unvouched record and missing pin, naming what to run, and exits 1: run it in CI.\n" +
			"--format json prints one JSON object: {\"check\", \"ok\", \"entries\": [{\"server\", \"package\",\n" +
			"\"version\", \"integrity\", \"state\", \"installed_version\", \"installed_integrity\", \"error\", \"distributions\"}],\n" +
			"\"unvouched\": [\"one line per other unvouched record\"],\n" +
			"\"pins\": [{\"name\", \"fqdn\", \"version\", \"integrity\", \"code_integrity\", \"state\", \"problem\"}]}.\n\n" +
			"Exit codes: 0 every entry as recorded (or, without --check, listed), 1 a drift (--check only),\n" +
			"2 a usage error or .pml/deps.json or .pml/mcp.lock cannot be read.",
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
			entries, err := doctor.LockEntries(cmd.Context(), ws.Dir)
			if err != nil {
				return &exitError{2, fmt.Errorf("%w; delete .pml/deps.json to install again", err)}
			}
			pins, err := registry.CheckPins(ws.Dir)
			if err != nil {
				return &exitError{2, err}
			}
			var drift []doctor.LockEntry
			for _, e := range entries {
				if e.State == doctor.LockDrift || e.State == doctor.LockUnvouched {
					drift = append(drift, e)
				}
			}
			others, err := unvouchedRecords(ws.Dir)
			if err != nil {
				return &exitError{2, err}
			}
			var pinDrift []registry.Pin
			for _, p := range pins {
				if p.State != registry.PinOK {
					pinDrift = append(pinDrift, p)
				}
			}
			out := cmd.OutOrStdout()
			if f == formatJSON {
				if err := writeJSON(out, lockJSON{Check: check, OK: len(drift)+len(others)+len(pinDrift) == 0, Entries: entries, Unvouched: others, Pins: pins}); err != nil {
					return err
				}
			} else if check {
				// One line per drift when there is any; else what was
				// checked.
				if len(drift) > 0 || len(pinDrift)+len(others) == 0 {
					printDrift(out, entries, drift)
				}
				for _, o := range others {
					fmt.Fprintf(out, "unvouched: %s\n", o)
				}
				if len(pinDrift) > 0 || len(drift)+len(others) == 0 {
					printPinDrift(out, pins, pinDrift)
				}
			} else {
				printLock(out, entries)
				printPins(out, pins)
			}
			if check && len(drift)+len(others)+len(pinDrift) > 0 {
				var what []string
				if len(drift) > 0 {
					what = append(what, fmt.Sprintf("%d npm package(s) installed otherwise than .pml/deps.json records, or not recorded by this user's pml", len(drift)))
				}
				if len(others) > 0 {
					what = append(what, fmt.Sprintf("%d record(s) of .pml/ written by something else than this user's pml in this workspace", len(others)))
				}
				if len(pinDrift) > 0 {
					what = append(what, fmt.Sprintf("%d capability pin(s) of .pml/mcp.lock whose cached copy drifted or is missing", len(pinDrift)))
				}
				return &exitError{1, errors.New(strings.Join(what, "; "))}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&check, "check", false, "exit 1, one line per drift, when an installed package differs from its record or a pinned capability's cached copy from its pin (for CI)")
	addFormatFlag(cmd, &format, nil)
	return cmd
}

// printDrift is --check's table output: one line per drift, or one line
// saying there is none.
func printDrift(w io.Writer, entries, drift []doctor.LockEntry) {
	if len(drift) == 0 {
		fmt.Fprintf(w, "%d npm package(s) recorded in .pml/deps.json, none installed otherwise\n", len(entries))
		return
	}
	for _, e := range drift {
		fmt.Fprintf(w, "%s: %s; %s\n", e.State, e.DriftText(), e.Fix())
	}
}

// pinFix is what to do about a pin whose cached copy drifted or is
// missing: fetch it again, which checks it against the pin.
func pinFix(p registry.Pin) string {
	return fmt.Sprintf("delete .pml/registry-cache/%s.json and run pml add %s (or any command that uses it) with a registry reachable: the copy fetched is checked against the pin", p.Name, p.Name)
}

// printPinDrift is --check's output for the pins of .pml/mcp.lock.
func printPinDrift(w io.Writer, pins, drift []registry.Pin) {
	if len(drift) == 0 {
		if len(pins) > 0 {
			fmt.Fprintf(w, "%d capability pin(s) in .pml/mcp.lock, each cached as pinned\n", len(pins))
		}
		return
	}
	for _, p := range drift {
		fmt.Fprintf(w, "%s: %s (pinned %s): %s; %s\n", p.State, p.Name, p.FQDN, p.Problem, pinFix(p))
	}
}

// printPins is the table of the pins of .pml/mcp.lock.
func printPins(w io.Writer, pins []registry.Pin) {
	if len(pins) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CAPABILITY\tPINNED\tVERSION\tSTATE")
	for _, p := range pins {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, p.FQDN, p.Version, p.State)
	}
	tw.Flush()
}

// printLock is the table of the recorded entries.
func printLock(w io.Writer, entries []doctor.LockEntry) {
	if len(entries) == 0 {
		fmt.Fprintln(w, "No npm package is recorded with its version in .pml/deps.json (it is recorded at a server's first install).")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tPACKAGE\tVERSION\tINTEGRITY\tSTATE")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Server, e.Package, e.Version, e.Integrity, e.State)
		// A Python server's lock: each distribution pip installed.
		for _, d := range e.Distributions {
			fmt.Fprintf(tw, "\t  %s\t\t\t\n", d)
		}
	}
	tw.Flush()
}
