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
