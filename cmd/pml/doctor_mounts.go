package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/config"
)

// checkExtraMounts lists the extra mounts (sandbox.mounts, per project and per
// server) in force after trust, so a person sees what beyond the
// workspace a tool container is to get. Refused ones never load (the
// config check fails); untrusted ones are held back by trust.
func checkExtraMounts(cfg *config.Config) (check, bool) {
	var parts []string
	for _, m := range cfg.Sandbox.Mounts {
		parts = append(parts, m.String())
	}
	var names []string
	for n := range cfg.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, m := range cfg.Servers[n].Mounts {
			parts = append(parts, m.String()+" for "+n)
		}
	}
	if len(parts) == 0 {
		return check{}, false
	}
	return check{"ok", "extra mounts", fmt.Sprintf("beyond the workspace (sandbox.mounts): %s; read and trusted, not yet mounted into tool containers by this pml", strings.Join(parts, ", ")), ""}, true
}
