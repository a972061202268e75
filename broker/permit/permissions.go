package permit

import (
	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/toolglob"
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

// DenySource names where cfg's deny list comes from: the environment
// variable, else the file when it exists; "" for pml's defaults.
func DenySource(cfg *config.Config) string {
	if s := cfg.Source("permissions.deny"); s != "" {
		return s
	}
	if cfg.HasFile() {
		return cfg.Path
	}
	return ""
}

// Decide returns the decision for tool and the pattern that decided it,
// as written ("" when no pattern matched and the answer is the default
// ask). Patterns match the tool by any of the names pml shows for it
// (shell:exec, shell__exec, mcp__pml__shell__exec) in any case
// (internal/toolglob), so a deny copied from a client's screen holds.
func (p Permissions) Decide(tool string) (call.Decision, string) {
	if pat := firstMatch(p.Deny, tool); pat != "" {
		return call.Deny, pat
	}
	if pat := exactIn(p.Ask, tool); pat != "" {
		return call.Ask, pat
	}
	if pat := exactIn(p.Allow, tool); pat != "" {
		return call.Allow, pat
	}
	if pat := firstMatch(p.Ask, tool); pat != "" {
		return call.Ask, pat
	}
	if pat := firstMatch(p.Allow, tool); pat != "" {
		return call.Allow, pat
	}
	return call.Ask, ""
}

// DeniesServer returns the deny pattern that denies every tool the
// server ns can have (toolglob.CoversNamespace: "ns:*", "*"), or "". A
// narrower deny leaves the server's other tools to be decided call by
// call.
func (p Permissions) DeniesServer(ns string) string {
	for _, pat := range p.Deny {
		if toolglob.CoversNamespace(pat, ns) {
			return pat
		}
	}
	return ""
}

// exactIn returns the first pattern of list that names tool exactly, in
// any of its forms and any case (toolglob.Exact), or "".
func exactIn(list []string, tool string) string {
	for _, e := range list {
		if toolglob.Exact(e, tool) {
			return e
		}
	}
	return ""
}

// Contains reports whether list names tool exactly (exactIn).
func Contains(list []string, tool string) bool { return exactIn(list, tool) != "" }

func firstMatch(patterns []string, tool string) string {
	for _, pat := range patterns {
		if toolglob.Match(pat, tool) {
			return pat
		}
	}
	return ""
}

// Unlisted decides a call of a tool its server does not list (a name no
// tools/list showed, which the server may still answer: the
// conformance suite's test_trigger_tool_change). Such a call goes on
// only when an entry of allow names the tool exactly: the tool's name,
// with no wildcard, in any of the forms and any case Decide reads
// (toolglob.Exact). A wildcard ("srv:*", "srv:test_*", "*") never
// reaches an unlisted tool: it was written for what the server lists,
// and a server must not widen it by answering names it does not show.
// Only allow counts, because only allow is a grant of the project's
// policy that waits for `pml trust` (internal/config/grants.go): an
// ask entry, which an untrusted .pml.json may add, does not reach an
// unlisted tool by itself. Beside the allow entry, an exact ask entry
// asks each time and a deny that matches the tool wins, as in Decide.
//
// It returns the decision and its pattern as Decide does, and named
// false when no allow entry names the tool exactly (the call is then
// refused, whatever a wildcard says; d is Deny and pattern "").
func (p Permissions) Unlisted(tool string) (d call.Decision, pattern string, named bool) {
	d, pattern = p.Decide(tool)
	if d == call.Deny {
		return d, pattern, true
	}
	if exactIn(p.Allow, tool) == "" {
		return call.Deny, "", false
	}
	// (Decide reads the exact entries of ask, then of allow, before any
	// wildcard: pattern is the exact entry that decided.)
	return d, pattern, true
}
