package doctor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/config"
)

// checkEnvSettings names every key of .pml.json that pml's environment
// sets (PML_<KEY>). Such a value applies with no trust step: it is taken
// as the person's own, yet the client's entry for pml can set it (the
// env of .mcp.json, which a repository can commit and the client asks
// about once). Said so that a grant nobody meant is seen. Values are not
// printed: one may be a secret.
func checkEnvSettings(cfg *config.Config) (Check, bool) {
	var set []string
	for key, src := range cfg.Sources {
		if src == config.EnvName(key) {
			set = append(set, fmt.Sprintf("%s (%s)", src, key))
		}
	}
	if len(set) == 0 {
		return Check{}, false
	}
	sort.Strings(set)
	return Check{"warn", "environment",
		"pml's environment sets " + strings.Join(set, ", ") + ": applied with no trust step, over any value .pml.json gives",
		"unset what you did not set yourself (in your shell, or in the env of your MCP client's entry for pml)"}, true
}

// entryEnvSettings names the PML_ variables (but PML_WORKSPACE, checked
// on its own) that a client entry for pml sets in its env, or "".
func entryEnvSettings(env map[string]string) string {
	var set []string
	for name := range env {
		if strings.HasPrefix(name, "PML_") && name != "PML_WORKSPACE" {
			set = append(set, name)
		}
	}
	sort.Strings(set)
	return strings.Join(set, ", ")
}
