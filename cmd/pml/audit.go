package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/termsafe"
)

// followEvery is how often pml audit -f looks for new entries.
const followEvery = 250 * time.Millisecond

func newAuditCmd(g *globals) *cobra.Command {
	var since, tool, outcome, format string
	var follow bool
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show this workspace's audit log: what ran, what was refused and why",
		Long: `pml audit reads the workspace's .pml/audit.jsonl, where pml writes one entry
per tool call (and one per egress connection): the tool, the outcome, the
permission pattern that decided, how long it took, the exit status and the
argument names (never their values).

Filters: --since a duration (10m, 2h) or a time (RFC 3339), --tool a tool
name or pattern in any form pml shows (shell:*, filesystem__read_file),
--outcome one of ` + strings.Join(audit.Decisions, ", ") + `.

--format json prints one JSON array of the entries; with -f, one entry per
line as they come. -f follows the log until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := outputFormat(cmd, format, false)
			if err != nil {
				return err
			}
			flt := audit.Filter{Tool: tool, Outcome: outcome}
			if since != "" {
				if flt.Since, err = parseSince(since, time.Now()); err != nil {
					return usageError(cmd, err)
				}
			}
			if err := flt.Check(); err != nil {
				return usageError(cmd, err)
			}
			_, ws, err := g.workspace()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runAudit(ctx, ws.Dir, cmd.OutOrStdout(), g.warnings(), f, flt, follow)
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "only entries since a duration ago (10m, 2h) or a time (2006-01-02T15:04:05Z)")
	cmd.Flags().StringVar(&tool, "tool", "", "only calls of this tool or pattern (shell:*)")
	cmd.Flags().StringVar(&outcome, "outcome", "", "only entries of this outcome: "+strings.Join(audit.Decisions, ", "))
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing entries as they are written, until interrupted")
	addFormatFlag(cmd, &format, nil)
	return cmd
}

// parseSince reads --since: a duration before now, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("invalid --since %q: a duration is how long ago, give it without a sign", s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("invalid --since %q: give a duration (10m, 2h) or a time (2006-01-02T15:04:05Z)", s)
}

func runAudit(ctx context.Context, dir string, stdout, stderr io.Writer, format string, flt audit.Filter, follow bool) error {
	if err := safefs.CheckStateDir(dir); err != nil {
		return &exitError{1, err}
	}
	path := filepath.Join(dir, ".pml", "audit.jsonl")
	out := newAuditPrinter(stdout, format, follow)
	f, err := safefs.Open(dir, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !follow {
			fmt.Fprintf(stderr, "pml audit: no audit log at %s yet: no tool call has been made in this workspace\n", path)
			return out.done()
		}
		f = nil
	case err != nil:
		return &exitError{1, fmt.Errorf("reading the audit log: %w", err)}
	}
	var rd *audit.Reader
	var fi os.FileInfo
	if f != nil {
		defer func() { _ = f.Close() }()
		rd, fi = audit.NewReader(f), statOf(f)
	}
	for {
		if rd != nil {
			for {
				e, err := rd.Next(flt)
				if err != nil {
					if !errors.Is(err, io.EOF) {
						return &exitError{1, fmt.Errorf("reading the audit log: %w", err)}
					}
					break
				}
				if err := out.entry(e); err != nil {
					return err
				}
			}
			reportBad(stderr, path, rd.Bad())
		}
		if !follow {
			if rd != nil {
				if n, ok := rd.Unterminated(); ok {
					fmt.Fprintf(stderr, "pml audit: line %d of %s has no end yet: an entry being written, or one cut short (a full disk, a crash), which pml terminates before its next entry\n", n, path)
				}
				if rd.Skipped > 0 {
					fmt.Fprintf(stderr, "pml audit: %d line(s) of %s are not audit entries; the entries around them are shown\n", rd.Skipped, path)
				}
			}
			return out.done()
		}
		select {
		case <-ctx.Done():
			return out.done()
		case <-time.After(followEvery):
		}
		// A rotated or replaced log: read the new file from its start
		// (a link or anything but a regular file is refused, as always).
		if cur, err := safefs.Lstat(dir, path); err == nil && (fi == nil || !os.SameFile(cur, fi)) {
			nf, err := safefs.Open(dir, path)
			if err != nil {
				continue
			}
			if f != nil {
				_ = f.Close()
			}
			f, rd, fi = nf, audit.NewReader(nf), statOf(nf)
		}
	}
}

// reportBad tells, on stderr, each line of the log that is not an entry
// (a torn one, by its number), so none is passed over in silence; the
// reader goes on with the next line.
func reportBad(stderr io.Writer, path string, bad []audit.BadLine) {
	for _, b := range bad {
		fmt.Fprintf(stderr, "pml audit: line %d of %s: %s\n", b.Line, path, b.Why)
	}
}

func statOf(f *os.File) os.FileInfo {
	fi, _ := f.Stat()
	return fi
}

// auditPrinter writes entries as a table, a JSON array, or (following)
// JSON lines.
type auditPrinter struct {
	w       io.Writer
	format  string
	follow  bool
	tw      *tabwriter.Writer
	entries []audit.Entry
}

func newAuditPrinter(w io.Writer, format string, follow bool) *auditPrinter {
	p := &auditPrinter{w: w, format: format, follow: follow, entries: []audit.Entry{}}
	if format == formatTable {
		p.tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(p.tw, "TIME\tTOOL\tOUTCOME\tMS\tSTATUS\tPATTERN\tREASON")
		if follow {
			_ = p.tw.Flush()
		}
	}
	return p
}

func (p *auditPrinter) entry(e audit.Entry) error {
	switch {
	case p.format == formatJSON && p.follow:
		return writeJSONLine(p.w, e)
	case p.format == formatJSON:
		p.entries = append(p.entries, e)
		return nil
	}
	tool, reason := e.Tool, e.Reason
	if e.Net != nil {
		reason = strings.TrimSpace(fmt.Sprintf("%s:%d up %d B down %d B %s", e.Net.Host, e.Net.Port, e.Net.BytesUp, e.Net.BytesDown, reason))
	}
	if e.NotDeclaredBy != "" {
		reason = strings.TrimSpace(reason + "; not declared by " + e.NotDeclaredBy)
		reason = strings.TrimPrefix(reason, "; ")
	}
	fmt.Fprintf(p.tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", e.Time.Local().Format("2006-01-02 15:04:05"), oneLine(tool), e.Decision, e.DurationMS, dash(oneLine(e.ExitStatus)), dash(oneLine(e.Pattern)), oneLine(reason))
	if p.follow {
		return p.tw.Flush()
	}
	return nil
}

func (p *auditPrinter) done() error {
	if p.format == formatJSON {
		if p.follow {
			return nil
		}
		return writeJSON(p.w, p.entries)
	}
	return p.tw.Flush()
}

func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a table row on one line, and the terminal's state as it
// was, whatever a name or reason holds (a client chooses the name of a
// tool it calls, unknown ones included): its control and bidi characters
// are shown quoted, and it is bounded (internal/termsafe).
func oneLine(s string) string { return termsafe.Quote(s, termsafe.DefaultMax) }
