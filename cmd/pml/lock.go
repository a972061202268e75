package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/cmd/pml/internal/doctor"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/toolpin"
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
	// Tools are the tool definitions held because they drifted from what
	// the person accepted (changed, or new), as pml last saw them listed.
	Tools []toolDrift `json:"tools"`
	// Committed are, with --check, the definitions the servers list now
	// that differ from the project's committed lock (.pml.lock): changed,
	// new or removed; Unlisted the servers that could not be listed.
	Committed []toolpin.CommittedDrift `json:"committed"`
	Unlisted  []string                 `json:"unlisted"`
}

// toolDrift is one held tool definition in pml lock's JSON.
type toolDrift struct {
	Tool    string   `json:"tool"`
	Kind    string   `json:"kind"`
	Change  string   `json:"change"`
	Changed []string `json:"changed"`
	Digest  string   `json:"digest"`
	Diff    string   `json:"diff"`
}

// pml lock shows the npm versions pml resolved and recorded
// (.pml/deps.json); --check is the CI gate on them (issue 43: an
// unpinned package is resolved once, and drift fails). The check is
// pml doctor's deps check (internal/doctor/deps.go), one line per drift.
func newLockCmd(g *globals) *cobra.Command {
	var (
		check   bool
		format  string
		accept  []string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "lock [--check] [--accept TOOL]...",
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
			"Then every tool definition held because it changed since it was accepted (or is new: issue 56), as pml last\n" +
			"saw its server list it, with a short diff; --accept TOOL pins the definition shown.\n" +
			"The digests of the definitions accepted here (each server's tools and prompts) are recorded in .pml.lock at\n" +
			"the workspace root, to commit: a server's first listing, an accepted change and pml lock write it. It vouches\n" +
			"for nothing in a session (what runs unasked is decided by your own pins only). With --check and a .pml.lock,\n" +
			"every server is started and listed (within --timeout, said on stderr; nothing is pinned or accepted) and\n" +
			"each definition whose digest differs from .pml.lock, each new one and each removed one is a drift: the CI\n" +
			"gate on a server that changed what it says since the lock was committed.\n" +
			"--check prints one line per drift, unvouched record and missing pin, naming what to run, and exits 1: run it in CI.\n" +
			"--format json prints one JSON object: {\"check\", \"ok\", \"entries\": [{\"server\", \"package\",\n" +
			"\"version\", \"integrity\", \"state\", \"installed_version\", \"installed_integrity\", \"error\", \"distributions\"}],\n" +
			"\"unvouched\": [\"one line per other unvouched record\"],\n" +
			"\"pins\": [{\"name\", \"fqdn\", \"version\", \"integrity\", \"code_integrity\", \"state\", \"problem\"}],\n" +
			"\"tools\": [{\"tool\", \"kind\", \"change\", \"changed\", \"digest\", \"diff\"}],\n" +
			"\"committed\": [{\"server\", \"kind\", \"name\", \"change\", \"committed\", \"listed\"}], \"unlisted\": [\"server: why\"]}.\n\n" +
			"Exit codes: 0 every entry as recorded (or, without --check, listed), 1 a drift (--check only),\n" +
			"2 a usage error or .pml/deps.json or .pml/mcp.lock cannot be read.",
		Example: "  pml lock            # the recorded versions and their state\n" +
			"  pml lock --check    # in CI: exit 1 when what is installed differs from the record,\n" +
			"                      # or a server's tools from .pml.lock",
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
			held, err := toolDrifts(ws.Dir, accept, cmd.ErrOrStderr())
			if err != nil {
				return &exitError{2, err}
			}
			committed, err := toolpin.ReadCommitted(ws.Dir)
			if err != nil {
				return &exitError{2, err}
			}
			cc := &committedCheck{}
			switch {
			case check && committed != nil:
				// The CI gate: what the servers say now against what
				// the person committed (a runner's state directory is
				// empty, so its own pins would be whatever is said).
				if cc, err = checkCommitted(cmd.Context(), g, committed, timeout, cmd.ErrOrStderr()); err != nil {
					return err
				}
			case check && os.Getenv("CI") != "":
				// A CI gate that compares no definition says so.
				fmt.Fprintf(cmd.ErrOrStderr(), "pml lock: no %s here, so no tool definition is compared with a committed one (a first listing of each server, pml tools, writes it; commit it)\n", toolpin.LockName)
			default:
				// The person's step: the committed lock is written from
				// their pins.
				if n, err := writeCommittedLock(ws.Dir); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "pml lock: %v\n", err)
				} else if n > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "pml lock: %s records the %d tool and prompt definition(s) accepted here; commit it\n", toolpin.LockName, n)
				}
			}
			if cc.Drifts == nil {
				cc.Drifts = []toolpin.CommittedDrift{}
			}
			if cc.Unlisted == nil {
				cc.Unlisted = []string{}
			}
			bad := len(cc.Drifts) + len(cc.Unlisted)
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
				if err := writeJSON(out, lockJSON{Check: check, OK: len(drift)+len(others)+len(pinDrift)+len(held)+bad == 0, Entries: entries, Unvouched: others, Pins: pins, Tools: held, Committed: cc.Drifts, Unlisted: cc.Unlisted}); err != nil {
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
				for _, h := range held {
					fmt.Fprintf(out, "tool %s: %s %s (%s); review it with pml lock and accept it with pml lock --accept %s\n", h.Change, h.Tool, h.Kind, strings.Join(h.Changed, ", "), h.Tool)
				}
				for _, d := range cc.Drifts {
					fmt.Fprintf(out, "%s: %s\n", toolpin.LockName, committedLine(d))
				}
				for _, u := range cc.Unlisted {
					fmt.Fprintf(out, "%s: not listed, so not compared: %s\n", toolpin.LockName, u)
				}
			} else {
				printLock(out, entries)
				printPins(out, pins)
				printToolDrifts(out, held)
			}
			if check && len(drift)+len(others)+len(pinDrift)+len(held)+bad > 0 {
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
				if len(held) > 0 {
					what = append(what, fmt.Sprintf("%d tool definition(s) held because they changed since they were accepted, or are new", len(held)))
				}
				if bad > 0 {
					what = append(what, committedSummary(cc))
				}
				return &exitError{1, errors.New(strings.Join(what, "; "))}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&accept, "accept", nil, "accept the held definition of this tool as pml lock shows it (pins it; repeatable)")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Minute, "with --check and a committed "+toolpin.LockName+": how long listing the servers may take in all")
	cmd.Flags().BoolVar(&check, "check", false, "exit 1, one line per drift, when an installed package differs from its record or a pinned capability's cached copy from its pin (for CI)")
	addFormatFlag(cmd, &format, nil)
	return cmd
}

// toolDrifts are the held tool definitions of the workspace
// (internal/toolpin), after accepting those named in accept: each
// accepted one's diff is written to w, then it is pinned.
func toolDrifts(ws string, accept []string, w io.Writer) ([]toolDrift, error) {
	store, err := toolpin.Open(ws, os.Getenv)
	if err == nil {
		store.OnCommitErr = func(err error) { fmt.Fprintf(w, "pml lock: %v\n", err) }
	}
	if err != nil {
		if len(accept) > 0 {
			return nil, err
		}
		return nil, nil
	}
	drifts, err := store.Drifts()
	if err != nil {
		return nil, err
	}
	left := map[string]bool{}
	for _, a := range accept {
		left[a] = true
	}
	out := []toolDrift{}
	for _, d := range drifts {
		if left[d.Now.Name] {
			delete(left, d.Now.Name)
			fmt.Fprintf(w, "accepting %s: %s\n%s", d.Now.Name, d.Summary(), d.Diff())
			if err := store.Accept(d.Now, d.Digest); err != nil {
				return nil, err
			}
			// The person's decision is audited like an approval's.
			if err := audit.New(filepath.Join(ws, ".pml", "audit.jsonl")).Record(audit.Entry{Tool: d.Now.Name, Decision: audit.Approved, Reason: "tool change accepted (pml lock --accept)"}); err != nil {
				fmt.Fprintf(w, "pml lock: %v\n", err)
			}
			continue
		}
		kind := d.Now.Kind
		if kind == "" {
			kind = toolpin.KindTool
		}
		out = append(out, toolDrift{Tool: d.Now.Name, Kind: kind, Change: string(d.State), Changed: d.Parts(), Digest: d.Digest, Diff: d.Diff()})
	}
	for _, a := range accept {
		if left[a] {
			return nil, fmt.Errorf("%s is not held (pml lock lists the held tools): nothing was accepted for it", a)
		}
	}
	return out, nil
}

// printToolDrifts is the table's part for held tool definitions: each
// with its diff.
func printToolDrifts(w io.Writer, held []toolDrift) {
	if len(held) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Held tool definitions (changed since accepted, or new); accept one with pml lock --accept TOOL:")
	for _, h := range held {
		fmt.Fprintf(w, "%s (%s %s: %s)\n", h.Tool, h.Change, h.Kind, strings.Join(h.Changed, ", "))
		for _, l := range strings.Split(strings.TrimRight(h.Diff, "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
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

// writeCommittedLock writes the project's committed lock from the
// person's pins (pml lock without --check): how many definitions it
// records. No state directory, nothing pinned: nothing is written.
func writeCommittedLock(ws string) (int, error) {
	store, err := toolpin.Open(ws, os.Getenv)
	if err != nil {
		return 0, nil
	}
	return store.WriteCommitted()
}
