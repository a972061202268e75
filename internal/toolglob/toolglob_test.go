package toolglob

import "testing"

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"shell:exec":              "shell:exec",
		"SHELL:EXEC":              "shell:exec",
		"shell__exec":             "shell:exec",
		"mcp__pml__shell__exec":   "shell:exec",
		"MCP__PML__Shell__Exec":   "shell:exec",
		"mcp__pml__filesystem__*": "filesystem:*",
		"shell__*":                "shell:*",
		"*":                       "*",
		"mcp__pml__*":             "*",
		"my_ns__do__it":           "my_ns:do__it",
		" shell:exec\t":           "shell:exec",
		"__exec":                  "__exec",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, good := range []string{"*", "shell:exec", "shell__*", "mcp__pml__fs__[rw]*", "a?b"} {
		if err := Check(good); err != nil {
			t.Errorf("Check(%q) = %v", good, err)
		}
	}
	for _, bad := range []string{"", "  ", "shell:[", "[", `shell:exec\`, "mcp__pml__[x"} {
		if err := Check(bad); err == nil {
			t.Errorf("Check(%q) accepted it", bad)
		}
	}
}

// A pattern covers a namespace when it matches every tool the server can
// have; one that matches only some of them does not.
func TestCoversNamespace(t *testing.T) {
	for _, p := range []string{"*", "memory:*", "MEMORY:*", "memory__*", "mcp__pml__memory__*", "mcp__pml__*", "*:*", "mem*", "m?mory:*", "*y:*", " memory:* "} {
		if !CoversNamespace(p, "memory") {
			t.Errorf("%q does not cover memory", p)
		}
	}
	for _, p := range []string{"memory:create_*", "memory:[a-z]*", "memory_*", "memoryx:*", "filesystem:*", `memory:\*`, "memory:[", "memory:create_entities", "", "*:x*"} {
		if CoversNamespace(p, "memory") {
			t.Errorf("%q covers memory", p)
		}
	}
}
