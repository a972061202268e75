package main

import (
	"fmt"
	"io"
)

// upgradeJSON is pml upgrade --format json (with --check too): what this
// pml is, what the latest release is, and what was done about it.
type upgradeJSON struct {
	Executable string `json:"executable"`
	Current    string `json:"current"`
	Latest     string `json:"latest"`
	UpToDate   bool   `json:"up_to_date"`
	// Upgraded: this run replaced the executable with the latest release.
	Upgraded bool `json:"upgraded"`
	// InstalledBy is what installed this pml ("" for pml's own install:
	// install.sh or an archive; deb, rpm, homebrew, scoop, go install,
	// source); Command how to upgrade it then.
	InstalledBy string `json:"installed_by"`
	Command     string `json:"upgrade_command"`
}

// report prints the result: r with --format json, else text for people.
func (u upgrader) report(w io.Writer, r upgradeJSON, text string) error {
	if u.format == formatJSON {
		return writeJSON(w, r)
	}
	_, err := fmt.Fprintln(w, text)
	return err
}
