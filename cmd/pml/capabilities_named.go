package main

import (
	"fmt"
	"path/filepath"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/internal/config"
)

// .pml.json's capabilities (issue 43): pml add NAME writes NAME there and
// pml remove NAME takes it out, so the project's capabilities are in the
// file a teammate clones (.pml/ is each clone's state): their pml stdio
// fetches and pins what it names. Written as pml add npm: writes mcps:
// under the edit lock, atomically, and trusted as pml's other writes are
// (the person asked for it).

// recordNamed writes ref into .pml.json's capabilities. A workspace
// without .pml.json gets one holding pml's default permissions as well:
// a file with none would ask before every tool pml otherwise allows.
func recordNamed(g *globals, ws, ref string) error {
	path := filepath.Join(ws, config.FileName)
	before, after, err := config.EditFile(ws, func(old []byte) ([]byte, error) {
		if old == nil {
			d := broker.DefaultPermissions()
			old = config.WithPermissions(d.Allow, d.Ask, d.Deny)
		}
		return config.AddCapabilityData(path, old, ref)
	})
	if err != nil {
		return &exitError{1, fmt.Errorf("writing %s to the capabilities of %s: %w (nothing was added; fix the file and run pml add again)", ref, path, err)}
	}
	w := g.narration()
	if after == nil {
		return nil // named there already
	}
	if err := openTrust(g.logger()).Saved(path, before, after, broker.DefaultPermissions().Allow); err != nil {
		fmt.Fprintf(w, "⚠ %s is in %s's capabilities but not in your trust records (%v): run `pml trust`\n", ref, path, err)
	}
	fmt.Fprintf(w, "  wrote %s to the capabilities of %s: commit it, and a clone's pml stdio fetches and pins it\n", ref, path)
	return nil
}

// forgetNamed takes every item naming name's registry entry out of
// .pml.json's capabilities; it reports whether there was one.
func forgetNamed(g *globals, ws, name string) (bool, error) {
	path := filepath.Join(ws, config.FileName)
	before, after, err := config.EditFile(ws, func(old []byte) ([]byte, error) {
		return config.RemoveCapabilityData(path, old, name)
	})
	if err != nil {
		return false, &exitError{1, err}
	}
	if after == nil {
		return false, nil
	}
	w := g.narration()
	// Removing grants nothing: the rest of the file stays trusted.
	if err := openTrust(g.logger()).Saved(path, before, after, broker.DefaultPermissions().Allow); err != nil {
		fmt.Fprintf(w, "⚠ %s is out of %s but your trust records are not updated (%v): run `pml trust`\n", name, path, err)
	}
	fmt.Fprintf(w, "removed %s from the capabilities of %s\n", name, path)
	return true, nil
}
