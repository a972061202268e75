package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pml-dev/pml/broker/permit"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/safefs"
)

// removeServer takes the MCP server name out of .pml.json and, with
// clean, deletes what it installed and its cached tools (after consent).
// done is false when .pml.json has no such server. rep gets what was
// done, for --format json.
func removeServer(g *globals, ws, name string, clean, yes bool, rep *removeJSON) (done bool, err error) {
	path := filepath.Join(ws, config.FileName)
	data, err := safefs.ReadFile(ws, path, safefs.MaxConfig)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, &exitError{2, err}
	}
	out, err := config.RemoveServerData(path, data, name)
	if err != nil {
		return true, &exitError{2, err}
	}
	if out == nil {
		return false, nil
	}
	w := g.narration()
	var files []tl.Leftover
	if clean {
		if files, err = tl.ServerFiles(ws, name); err != nil {
			return true, &exitError{1, err}
		}
		fmt.Fprintf(w, "pml remove --clean takes %s out of %s and deletes:\n", name, path)
		describeLeftovers(w, "", files)
		// Deleting installed dependencies is asked; a cached tool list
		// is only a cache.
		if hasInstalled(files) && !confirmAdd(w, yes) {
			return true, &exitError{3, errors.New("nothing was removed: approve on a terminal, or run again with --yes")}
		}
	}
	before, after, err := config.EditFile(ws, func(old []byte) ([]byte, error) {
		return config.RemoveServerData(path, old, name)
	})
	if err != nil {
		return true, &exitError{1, err}
	}
	if after == nil {
		return true, &exitError{2, fmt.Errorf("%s is no longer in %s (changed meanwhile)", name, path)}
	}
	// What pml wrote for the person stays trusted as the rest of the file
	// was (removing grants nothing).
	if err := openTrust(g.logger()).Saved(path, before, after, permit.DefaultPermissions().Allow); err != nil {
		fmt.Fprintf(w, "⚠ %s is removed but your trust records are not updated (%v): run `pml trust`\n", name, err)
	}
	fmt.Fprintf(w, "removed mcps.%s from %s\n", name, path)
	rep.Kind, rep.File = "server", path
	if clean && len(files) > 0 {
		if err := tl.RemoveLeftovers(ws, files); err != nil {
			return true, &exitError{1, fmt.Errorf("%s is out of %s, but deleting its files failed: %w (pml cleanup tries again)", name, path, err)}
		}
		rep.Deleted = leftoversJSON(files)
		kinds := []string{}
		for _, f := range files {
			if !slices.Contains(kinds, f.Kind) {
				kinds = append(kinds, f.Kind)
			}
		}
		fmt.Fprintf(w, "deleted %s's %s\n", name, strings.Join(kinds, " and "))
	} else if files, _ := tl.ServerFiles(ws, name); len(files) > 0 {
		rep.Kept = leftoversJSON(files)
		fmt.Fprintf(w, "  its installed files are kept: pml cleanup (or pml remove %s --clean next time) deletes them\n", name)
	}
	return true, nil
}

// describeLeftovers lists ls, one a line, under title.
func describeLeftovers(w io.Writer, title string, ls []tl.Leftover) {
	if title != "" {
		fmt.Fprintln(w, title)
	}
	if len(ls) == 0 {
		fmt.Fprintln(w, "  nothing installed or cached")
	}
	for _, l := range ls {
		what := l.Path
		if l.Kind == "dependencies" {
			what += " (with its record in .pml/deps.json, if any)"
		} else {
			what = "its entry in " + what
		}
		fmt.Fprintf(w, "  %s: %s %s\n", l.Server, l.Kind, what)
	}
}

// hasInstalled reports whether ls holds installed dependencies.
func hasInstalled(ls []tl.Leftover) bool {
	for _, l := range ls {
		if l.Kind == "dependencies" {
			return true
		}
	}
	return false
}
