package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/internal/config"
)

// depEntry is the mcps entry pml add writes for a server a capability
// requires (its mcp_deps): what pml add npm: writes, plus the variables
// the server needs.
type depEntry struct {
	Description string        `json:"description,omitempty"`
	Image       string        `json:"image"`
	Command     string        `json:"command,omitempty"`
	Args        []string      `json:"args,omitempty"`
	EnvRequired []string      `json:"env_required,omitempty"`
	Install     *installEntry `json:"install,omitempty"`
}

// recordDeps says what capability c requires and what that grants, and
// records each server it installed in .pml.json's mcps, trusted as
// pml add npm:'s entries are (the person asked for the capability and
// approved the install): from then on it is a server of the project,
// under the same policy as any other. A server that was already
// configured is used as it is and not written.
func recordDeps(g *globals, ws string, c broker.Capability) error {
	if len(c.Requires) == 0 {
		return nil
	}
	// The broker said "NAME requires: …" before it installed them; here
	// each one's outcome and what it grants.
	w := g.narration()
	path := filepath.Join(ws, config.FileName)
	store := openTrust(g.logger())
	for _, r := range c.Requires {
		if r.Configured || r.Server == nil {
			fmt.Fprintf(w, "  %s: the server of that name in .pml.json, used as it is. %s\n", r.Name, r.Grants)
			continue
		}
		s := r.Server
		entry := depEntry{Description: fmt.Sprintf("required by %s (%s), added by pml add", c.Name, c.FQDN),
			Image: s.Image, Command: s.Command, Args: s.Args, EnvRequired: s.EnvRequired}
		if s.Install == nil {
			return &exitError{1, fmt.Errorf("%s, which %s requires, has no install step to pin", r.Name, c.Name)}
		}
		entry.Install = &installEntry{Command: s.Install.Command, Args: s.Install.Args, Integrity: s.Install.Integrity}
		before, after, err := config.EditFile(ws, func(old []byte) ([]byte, error) {
			return config.AddServerData(path, old, r.Name, config.EntryBytes(entry), false)
		})
		if err != nil {
			return &exitError{1, fmt.Errorf("recording %s, which %s requires, in %s: %w (the capability is not added; fix it and run pml add again)", r.Name, c.Name, path, err)}
		}
		if err := store.Saved(path, before, after, broker.DefaultPermissions().Allow); err != nil {
			fmt.Fprintf(w, "⚠ mcps.%s is written but not in your trust records (%v): run `pml trust`\n", r.Name, err)
		}
		fmt.Fprintf(w, "  %s: installed, pinned to %s; wrote mcps.%s to %s. %s\n", r.Name, entry.Install.Integrity, r.Name, path, r.Grants)
	}
	// The seeds' "⚠ Set ANTHROPIC_API_KEY for serena".
	for _, r := range c.Requires {
		for _, v := range r.EnvRequired {
			if os.Getenv(v) == "" {
				fmt.Fprintf(w, "⚠ %s (required by %s) needs %s: set it in %s or in pml's environment\n", r.Name, c.Name, v, filepath.Join(ws, ".env"))
			}
		}
	}
	return nil
}
