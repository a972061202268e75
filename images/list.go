package images

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Row is one line of `pml images list`.
type Row struct {
	Image  string   `json:"image"`
	UsedBy []string `json:"used_by"`
	Source string   `json:"source"`
	Status string   `json:"status"`
	// Present is false when the image is missing or not the pinned one.
	Present bool   `json:"present"`
	Size    int64  `json:"size,omitempty"`
	Pin     string `json:"pinned_digest,omitempty"`
	// Digest is the registry digest the local image is known by.
	Digest string `json:"digest,omitempty"`
	ID     string `json:"id,omitempty"`
	Build  string `json:"build,omitempty"`
}

// List describes every wanted image as it is on this host.
func List(ctx context.Context, eng Engine, wants []Want) ([]Row, error) {
	rows := make([]Row, 0, len(wants))
	for _, w := range wants {
		loc, err := Locate(ctx, eng, w)
		if err != nil {
			return nil, err
		}
		r := Row{Image: w.String(), UsedBy: w.UsedBy, Source: w.Source, Status: loc.Presence.String(), Pin: w.Pin, Build: w.Build}
		if r.UsedBy == nil {
			r.UsedBy = []string{}
		}
		if loc.Presence != Missing {
			r.Size = loc.Image.Size
			r.ID = loc.Image.ID
			r.Digest = digestFor(loc.Image.RepoDigests, w.Ref.Name)
			r.Present = loc.Presence == Present || loc.Presence == Loaded
			if loc.Presence == Loaded {
				r.Digest = w.Pin
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// WriteTable prints rows as an aligned table.
func WriteTable(out io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tUSED BY\tSTATUS\tSIZE\tDIGEST")
	for _, r := range rows {
		size := "-"
		if r.Size > 0 {
			size = megabytes(r.Size)
		}
		digest := r.Digest
		switch {
		case digest == "" && r.Source == SourceLocal:
			digest = "(built locally)"
		case digest == "":
			digest = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Image, strings.Join(r.UsedBy, "; "), r.Status, size, shortDigest(digest))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if !r.Present && r.Build != "" && r.Source == SourceLocal {
			if _, err := fmt.Fprintf(out, "%s is built on this host: %s\n", r.Image, r.Build); err != nil {
				return err
			}
		}
	}
	return nil
}

// shortDigest keeps tables readable; --json has the full digest.
func shortDigest(d string) string {
	if strings.HasPrefix(d, "sha256:") && len(d) > 7+12 {
		return d[:7+12]
	}
	return d
}

// WriteSummary prints the pull results as a table and one line of totals.
func WriteSummary(out io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tRESULT\tSIZE\tDIGEST\tTIME")
	counts := map[string]int{}
	for _, r := range results {
		counts[r.Status]++
		size, digest, took := "-", "-", "-"
		if r.Image.Size > 0 {
			size = megabytes(r.Image.Size)
		}
		if r.Digest != "" {
			digest = shortDigest(r.Digest)
		}
		if r.Status == StatusPulled || r.Status == StatusBuilt {
			took = seconds(r.Elapsed)
		}
		// Reasons are long: they follow the table (and the command's error).
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Want.String(), r.Status, size, digest, took)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var parts []string
	for _, s := range []string{StatusPulled, StatusBuilt, StatusPresent, StatusLocal, StatusFailed} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	_, err := fmt.Fprintf(out, "%d images: %s\n", len(results), strings.Join(parts, ", "))
	return err
}
