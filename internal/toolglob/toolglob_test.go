package toolglob

import (
	"strings"
	"testing"
)

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

// "Always" saves a tool's name escaped: a tool named "*" (or "a?b",
// "[x]", "\\") is allowed alone, never read as a glob (issue 50).
func TestEscapeNamesOneTool(t *testing.T) {
	for _, c := range []struct {
		tool, saved string
		others      []string
	}{
		{"evil:*", `evil:\*`, []string{"evil:delete_all", "evil:x", "evil:"}},
		{"a:b?c", `a:b\?c`, []string{"a:bxc", "a:b_c"}},
		{"a:[x]", `a:\[x]`, []string{"a:x"}},
		{`a:b\c`, `a:b\\c`, []string{"a:bc", `a:b\\c`}},
		{"shell:exec", "shell:exec", []string{"shell:exec2"}},
	} {
		if got := Escape(c.tool); got != c.saved {
			t.Errorf("Escape(%q) = %q, want %q", c.tool, got, c.saved)
		}
		if l, ok := Literal(c.saved); !ok || l != c.tool {
			t.Errorf("Literal(%q) = %q, %v", c.saved, l, ok)
		}
		if err := Check(c.saved); err != nil {
			t.Errorf("Check(%q): %v", c.saved, err)
		}
		if !Exact(c.saved, c.tool) || !Match(c.saved, c.tool) || !Exact(strings.ToUpper(c.saved), c.tool) {
			t.Errorf("%q does not name %q exactly", c.saved, c.tool)
		}
		for _, o := range c.others {
			if Match(c.saved, o) || Exact(c.saved, o) {
				t.Errorf("%q, saved for %q, matches %q", c.saved, c.tool, o)
			}
		}
	}
	// The unescaped glob is no exact name of the tool it spells.
	if Exact("evil:*", "evil:*") || !Match("evil:*", "evil:delete_all") {
		t.Error(`"evil:*" is a glob, not the name of evil:*`)
	}
	for _, p := range []string{"a*", "a?", "a[b]", `a\`} {
		if _, ok := Literal(p); ok {
			t.Errorf("Literal(%q) reads it as a name", p)
		}
	}
}
