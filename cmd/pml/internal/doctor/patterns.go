package doctor

import (
	"fmt"
	"path"
	"strings"

	"github.com/pml-dev/pml/broker/permit"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/toolglob"
)

// checkPatterns warns about each permission pattern that matches no tool
// pml knows (broker.Known): a typo in a deny lets the tool it meant run
// without a word, and one in allow or ask leaves the tool asked about,
// so the person should hear of it before a call does. A pattern that may
// name a tool of a configured server whose tools are not cached yet
// (never started here) is given the benefit of the doubt.
func checkPatterns(cfg *config.Config, known tl.KnownTools) []Check {
	const name = "permissions"
	p := permit.PermissionsFrom(cfg)
	lists := []struct {
		key      string
		patterns []string
	}{{"deny", p.Deny}, {"ask", p.Ask}, {"allow", p.Allow}}
	var out []Check
	total := 0
	for _, l := range lists {
		src := cfg.Source("permissions." + l.key)
		if src == "" {
			src = "pml's defaults"
		}
		for _, pat := range l.patterns {
			total++
			if matchesKnown(pat, known) {
				continue
			}
			detail := fmt.Sprintf("the %s pattern %q (permissions.%s in %s) matches no tool pml knows", l.key, pat, l.key, src)
			if l.key == "deny" {
				detail += ": the tool it was meant to deny is not denied"
			}
			out = append(out, Check{"warn", name, detail,
				fmt.Sprintf("correct it to a tool's name as pml shows it (shell:exec, shell__exec and mcp__pml__shell__exec all work; * and ? are wildcards), or remove it from permissions.%s", l.key)})
		}
	}
	if len(out) == 0 {
		what := fmt.Sprintf("all %d permission patterns match a known tool", total)
		if len(known.Unlisted) > 0 {
			what += fmt.Sprintf(" (or may match a tool of %s, not started here yet)", strings.Join(known.Unlisted, ", "))
		}
		out = append(out, Check{"ok", name, what, ""})
	}
	return out
}

// matchesKnown reports whether pat matches a known tool, or may match a
// tool of a server whose tools are not known yet: its namespace part
// matches the server's name.
func matchesKnown(pat string, known tl.KnownTools) bool {
	for _, n := range known.Names {
		if toolglob.Match(pat, n) {
			return true
		}
	}
	ns, _, _ := strings.Cut(toolglob.Normalize(pat), ":")
	for _, s := range known.Unlisted {
		if ok, err := path.Match(ns, strings.ToLower(s)); err == nil && ok {
			return true
		}
	}
	return false
}
