package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/broker/permit"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/trust"
)

// exitNeedsPerson: pml trust found something to trust but had no terminal
// to ask on and no --yes.
const exitNeedsPerson = 3

func newTrustCmd(g *globals) *cobra.Command {
	var yes, revoke, jsonAlias bool
	var format string
	cmd := &cobra.Command{
		Use:   "trust",
		Short: "Trust this project's .pml.json: what it grants beyond pml's defaults applies only once you have",
		Long: `pml trust shows what this project's .pml.json grants beyond pml's built-in
defaults (tools run without asking, the user containers run as, hosts they may
reach, servers, a cloud or registry that receives your keys) and, when you
trusted an earlier version, what changed since. On a terminal it asks y/N.

Until you trust a content, pml applies the file only as far as it narrows
the defaults (deny and ask apply at once); a clone, a container or the model
writing the file cannot widen what pml allows. The record is kept outside
every workspace, in $XDG_STATE_HOME/pml/trust.json (else
~/.local/state/pml/trust.json), by the file's path and the full sha256 of
the exact bytes of .pml.json and .pml.local.json: after any edit the content
is not the one trusted until pml trust runs again (what you trusted of it
still applies meanwhile, and what it grants beyond that waits).

Exit status: 0 trusted (or nothing to trust), 1 you said no,
3 a person must decide (no terminal and no --yes), 2 usage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := outputFormat(cmd, format, jsonAlias)
			if err != nil {
				return err
			}
			if yes && revoke {
				return usageError(cmd, errors.New("--yes and --revoke contradict each other"))
			}
			return runTrust(g, cmd.OutOrStdout(), g.narration(), f, yes, revoke)
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "trust without asking (scripts, CI)")
	cmd.Flags().BoolVar(&revoke, "revoke", false, "forget what was trusted for this project's .pml.json")
	addFormatFlag(cmd, &format, &jsonAlias)
	return cmd
}

// trustReport is pml trust's answer, for --format json.
type trustReport struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256,omitempty"`
	// LocalSHA256 is .pml.local.json's, when there is one: trust covers
	// the exact bytes of both.
	LocalSHA256 string         `json:"local_sha256,omitempty"`
	Result      string         `json:"result"`
	Grants      []config.Grant `json:"grants"`
	Added       []config.Grant `json:"added,omitempty"`
	Dropped     []config.Grant `json:"dropped,omitempty"`
	// MountsMoved are the mount sources that changed on the host since
	// they were trusted (trust.MountsMoved).
	MountsMoved []string `json:"mounts_moved,omitempty"`
}

// Results of pml trust.
const (
	trustNothing    = "nothing to trust"
	trustAlready    = "already trusted"
	trustDone       = "trusted"
	trustDeclined   = "not trusted"
	trustNeedPerson = "needs a person"
	trustRevoked    = "revoked"
)

func runTrust(g *globals, stdout, stderr io.Writer, format string, yes, revoke bool) error {
	log, ws, err := g.workspace()
	if err != nil {
		return err
	}
	if err := safefs.CheckStateDir(ws.Dir); err != nil {
		return &exitError{2, err}
	}
	// What a killed add (or first call) left mid-install goes first, as
	// pml add does (issue 51).
	if _, err := clearInterrupted(g, ws.Dir, stderr); err != nil {
		return &exitError{1, err}
	}
	cfg, err := config.Load(ws.Dir, func(string) string { return "" })
	if err != nil {
		return &exitError{2, fmt.Errorf("%w\nFix the file first: pml trusts only a policy it can read", err)}
	}
	store, err := trust.Open(os.Getenv)
	if err != nil {
		return &exitError{1, err}
	}
	rec, err := store.Lookup(cfg.Path)
	if errors.Is(err, trust.ErrMalformed) {
		// Not honoured: this run shows everything and replaces it.
		fmt.Fprintf(stderr, "pml trust: %v\n", err)
	} else if err != nil {
		return &exitError{1, err}
	}
	defaults := permit.DefaultPermissions().Allow
	grants := trust.Grants(cfg, rec, defaults)
	added, dropped := trust.Changes(rec, grants)
	rep := trustReport{File: cfg.Path, SHA256: cfg.FileSum, LocalSHA256: cfg.LocalSum, Grants: grants, Added: added, Dropped: dropped}
	if rep.Grants == nil {
		rep.Grants = []config.Grant{}
	}
	finish := func(result string, code int) error {
		rep.Result = result
		if format == formatJSON {
			if err := writeJSON(stdout, rep); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(stdout, "%s: %s\n", trust.Names(cfg), result)
			if result != trustRevoked {
				// Trusting a project is trusting its servers as they
				// first answered: what they say differently since is
				// shown here, and accepted one by one (pml lock --accept).
				if held, err := toolDrifts(ws.Dir, nil, io.Discard); err == nil {
					printToolDrifts(stdout, held)
				}
			}
		}
		if code != 0 {
			return &exitError{code, nil}
		}
		return nil
	}
	if revoke {
		if err := store.Revoke(cfg.Path); err != nil {
			return &exitError{1, err}
		}
		log.Debug().Str("file", cfg.Path).Msg("trust revoked")
		return finish(trustRevoked, 0)
	}
	if !cfg.HasFile() {
		return finish(trustNothing, 0)
	}
	// A mount source that leads elsewhere now, or is another directory,
	// is refused until the person trusts what is there now.
	moved := trust.MountsMoved(rec, cfg)
	rep.MountsMoved = moved
	if len(added) == 0 && len(moved) == 0 && rec.Whole(cfg) {
		// Trust is of the exact bytes: only the content trusted is
		// "already trusted". Another one granting the same is shown (by
		// grant: nothing more) and asked like any other.
		return finish(trustAlready, 0)
	}
	if format != formatJSON {
		describeTrust(stdout, cfg, rec, grants, added, dropped)
		if len(moved) > 0 {
			fmt.Fprintln(stdout, "Mount sources changed on the host since (trusting records them as they are now):")
			for _, m := range moved {
				fmt.Fprintf(stdout, "  ~ %s\n", m)
			}
		}
	}
	if !yes {
		if !isatty.IsTerminal(os.Stdin.Fd()) {
			fmt.Fprintf(stderr, "pml trust: no terminal to ask on: run `pml trust --yes` in %s to trust this content (or `pml trust` on a terminal)\n", trust.Path(ws.Dir))
			return finish(trustNeedPerson, exitNeedsPerson)
		}
		ask(stderr, "Trust this content of "+trust.Names(cfg)+"? [y/N] ")
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
		default:
			return finish(trustDeclined, 1)
		}
	}
	// What is recorded is the content read above, by its hash: if the file
	// changed meanwhile, the new content is not trusted.
	if err := store.Trust(cfg, defaults); err != nil {
		return &exitError{1, err}
	}
	return finish(trustDone, 0)
}

// describeTrust says, in words, what the file grants and what changed
// since the content trusted before.
func describeTrust(w io.Writer, cfg *config.Config, rec *trust.Record, grants, added, dropped []config.Grant) {
	fmt.Fprintf(w, "%s (sha256 %s)\n", trust.Names(cfg), short(cfg.Sum))
	if rec != nil && !rec.Whole(cfg) && rec.SHA256 != "" {
		fmt.Fprintln(w, "This content is not the one you trusted (its sha256 differs).")
	}
	if len(grants) == 0 {
		fmt.Fprintln(w, "grants nothing beyond pml's defaults (it may deny or ask more).")
	} else {
		fmt.Fprintln(w, "grants, beyond pml's defaults:")
		for _, g := range grants {
			fmt.Fprintf(w, "  - %s\n", g.Text)
		}
	}
	if rec == nil {
		return
	}
	if len(added) == 0 && len(dropped) == 0 {
		fmt.Fprintln(w, "Since you last trusted it: nothing more is granted.")
		return
	}
	fmt.Fprintln(w, "Since you last trusted it:")
	for _, g := range added {
		fmt.Fprintf(w, "  + %s\n", g.Text)
	}
	for _, g := range dropped {
		fmt.Fprintf(w, "  - no longer: %s\n", g.Text)
	}
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}
