package config

import (
	"strings"
	"testing"
)

// pml trust names what a permissions.allow pattern lets run: a server's
// prompts and resources too (issue 53).
func TestTrustSaysWhichPromptsAndResourcesAPatternAllows(t *testing.T) {
	for p, want := range map[string]string{
		"*":                              "every server's prompts and resources",
		"everything:prompt:greet":        "the prompts",
		"everything:resource:embedded:*": "the resources",
		"memory:*":                       "the server's tools, prompts and resources",
		"shell:exec":                     "shell:exec",
	} {
		if got := quoteTool(p); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want it to say %q", p, got, want)
		}
	}
}
