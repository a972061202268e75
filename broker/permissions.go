package broker

import (
	"path"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/toolbox"
)

// Decision is the permission outcome for one tool call.
type Decision string

const (
	Allow Decision = "allow"
	Ask   Decision = "ask"
	Deny  Decision = "deny"
)

// Permissions decide whether a tool may run. Patterns are globs on tool
// names ("filesystem:*", "shell:exec", "*"); deny beats ask beats allow,
// and a tool matching nothing is asked about. One refinement: an exact
// tool name in allow (what answering "Always" writes) beats a wildcard in
// ask, so "Always" keeps its promise; an exact name in ask still wins.
type Permissions struct {
	Allow, Ask, Deny []string
}

// DefaultPermissions apply when the workspace has no .pml.json: tools that
// only read are allowed; anything that writes or runs commands is asked.
func DefaultPermissions() Permissions {
	var p Permissions
	for _, t := range toolbox.Filesystem {
		if !t.Writes {
			p.Allow = append(p.Allow, t.Name)
		}
	}
	return p
}

// PermissionsFrom returns the permissions in effect: .pml.json's when the
// file exists (it is then the only source), else the defaults; with or
// without the file, a list set in the environment (PML_PERMISSIONS_DENY,
// ...) replaces that list.
func PermissionsFrom(cfg *config.Config) Permissions {
	if cfg == nil {
		return DefaultPermissions()
	}
	if cfg.HasFile() {
		return Permissions{Allow: cfg.Permissions.Allow, Ask: cfg.Permissions.Ask, Deny: cfg.Permissions.Deny}
	}
	p := DefaultPermissions()
	if cfg.Source("permissions.allow") != "" {
		p.Allow = cfg.Permissions.Allow
	}
	if cfg.Source("permissions.ask") != "" {
		p.Ask = cfg.Permissions.Ask
	}
	if cfg.Source("permissions.deny") != "" {
		p.Deny = cfg.Permissions.Deny
	}
	return p
}

// denySource names where cfg's deny list comes from: the environment
// variable, else the file when it exists; "" for pml's defaults.
func denySource(cfg *config.Config) string {
	if s := cfg.Source("permissions.deny"); s != "" {
		return s
	}
	if cfg.HasFile() {
		return cfg.Path
	}
	return ""
}

// Decide returns the decision for tool and the pattern that decided it
// ("" when no pattern matched and the answer is the default ask).
func (p Permissions) Decide(tool string) (Decision, string) {
	if pat := firstMatch(p.Deny, tool); pat != "" {
		return Deny, pat
	}
	if contains(p.Ask, tool) {
		return Ask, tool
	}
	if contains(p.Allow, tool) {
		return Allow, tool
	}
	if pat := firstMatch(p.Ask, tool); pat != "" {
		return Ask, pat
	}
	if pat := firstMatch(p.Allow, tool); pat != "" {
		return Allow, pat
	}
	return Ask, ""
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func firstMatch(patterns []string, tool string) string {
	for _, pat := range patterns {
		if pat == tool {
			return pat
		}
		// Tool names hold no '/', so path.Match's '*' spans the whole name.
		if ok, err := path.Match(pat, tool); err == nil && ok {
			return pat
		}
	}
	return ""
}
