package mcpname

import (
	"strings"
	"testing"
)

func TestTool(t *testing.T) {
	for _, ok := range []string{"getUser", "DATA_EXPORT_v2", "admin.tools.list", "user-profile/update", "a", strings.Repeat("x", 128),
		// Past MCP's SHOULD, as servers in use name tools (the go-sdk's
		// everything example: "elicit (form)"): words and parentheses.
		"elicit (form)", "with space"} {
		if err := Tool(ok); err != nil {
			t.Errorf("Tool(%q): %v", ok, err)
		}
		if err := Prompt(ok); err != nil {
			t.Errorf("Prompt(%q): %v", ok, err)
		}
	}
	for bad, says := range map[string]string{
		"":                       "empty",
		"*":                      `"*" holds '*'`,
		"evil:*":                 `':'`,
		"a?b":                    `'?'`,
		"[x]":                    `'['`,
		`a\b`:                    `'\\'`,
		" lead":                  "starts or ends with a space",
		"a,b=c!":                 "','",
		"$evil":                  "'$'",
		"trail ":                 "starts or ends with a space",
		"tab\there":              "U+0009",
		"dele\u200bte":           `"dele\u200bte" holds U+200B`,
		"\ufeffbom":              "U+FEFF",
		"soft\u00adhyphen":       "U+00AD",
		"tag\U000e0041":          "U+E0041",
		"vs\ufe0f":               "U+FE0F",
		"e\u0301":                "U+0301",
		"caf\u00e9":              "'é' (U+00E9)",
		"esc\x1b[2K":             `"esc\x1b[2K" holds U+001B`,
		"bad\xff":                "the byte 0xff",
		strings.Repeat("x", 129): "129 characters long",
	} {
		err := Tool(bad)
		if err == nil {
			t.Errorf("Tool(%q) accepted it", bad)
			continue
		}
		if !strings.Contains(err.Error(), says) {
			t.Errorf("Tool(%q) = %q; want it to say %q", bad, err, says)
		}
		if Prompt(bad) == nil {
			t.Errorf("Prompt(%q) accepted it", bad)
		}
	}
}

func TestResource(t *testing.T) {
	for _, ok := range []string{"main.rs", "Project Files", "README (日本語)", "café"} {
		if err := Resource(ok); err != nil {
			t.Errorf("Resource(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "  ", "a\u200bb", "x\u202ey", "e\u0301", "\U000e0041", "line\nbreak", "\xff", strings.Repeat("é", 257)} {
		if Resource(bad) == nil {
			t.Errorf("Resource(%q) accepted it", bad)
		}
	}
	for _, ok := range []string{"file:///project/src/main.rs", "https://example.com/a?b=c#d", "custom+x-1.y:thing", "git://r/%E2%80%8B"} {
		if err := ResourceURI(ok); err != nil {
			t.Errorf("ResourceURI(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "no-scheme", ":x", "1x:y", "file:///a b", "file:///a\u200b", "https://é.example/", "x:\x00", "a_b:c", strings.Repeat("a", 2050) + ":"} {
		if ResourceURI(bad) == nil {
			t.Errorf("ResourceURI(%q) accepted it", bad)
		}
	}
}
