package mcpname

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/toolglob"
)

// FuzzNames takes any string as a name a server or a registry chose and
// checks what pml does with it (issue 50). Whatever it is: no panic; a
// tool or prompt name accepted is 1–128 bytes of MCP's set, so it holds no
// glob character (the "Always" pattern of server:name names that tool and
// no other) and nothing termsafe quotes (it is shown as it is); a
// resource name or URI accepted holds nothing termsafe quotes either; a
// string with an invisible character (Cf, the tag block, a variation
// selector, a default-ignorable, a combining mark) is refused as a name
// and quoted when shown, and termsafe.Quote's output holds none of them,
// is valid UTF-8 and is bounded.
func FuzzNames(f *testing.F) {
	for _, s := range []string{
		"getUser", "admin.tools.list", "user-profile/update", "*", "evil:*", "a?b", "[x]", `a\b`, "",
		"dele\u200bte", "\ufeffbom", "soft\u00adhyphen", "tag\U000e0041\U000e007f", "vs\ufe0f\U000e0100",
		"e\u0301", "cgj\u034f", "\u3164", "\u180e", "rlo\u202eevil", "esc\x1b[2K\r", "bad\xff\xfe", "café",
		"file:///a/b", "https://x/%E2%80%8B", "no scheme", strings.Repeat("x", 128), strings.Repeat("x", 129),
	} {
		f.Add(s, 0)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max > 1000 || max < -1000 {
			max %= 1000
		}
		tool, prompt := Tool(s), Prompt(s)
		if (tool == nil) != (prompt == nil) {
			t.Fatalf("%q: tool rule %v, prompt rule %v", s, tool, prompt)
		}
		invisible := false
		for _, r := range s {
			if r >= 0xe0000 && r <= 0xe007f || unicode.In(r, unicode.Cf, unicode.M, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point) {
				invisible = true
			}
		}
		if invisible && !termsafe.Has(s) {
			t.Fatalf("%q holds an invisible character termsafe does not see", s)
		}
		if tool == nil {
			if len(s) < 1 || len(s) > MaxLen || strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./ ()") != "" || s[0] == ' ' || s[len(s)-1] == ' ' || termsafe.Has(s) || invisible {
				t.Fatalf("%q passed the tool rule", s)
			}
			if q := termsafe.Quote(s, MaxLen); q != s {
				t.Fatalf("an accepted name %q is shown as %q", s, q)
			}
			name := "srv:" + s
			saved := toolglob.Escape(name)
			if !toolglob.Exact(saved, name) || toolglob.Match(saved, "srv:delete_all") && s != "delete_all" {
				t.Fatalf("the Always pattern %q of %q is not exact", saved, name)
			}
		}
		if Resource(s) == nil && (termsafe.Has(s) || invisible || !utf8.ValidString(s)) {
			t.Fatalf("the resource name %q passed", s)
		}
		if ResourceURI(s) == nil {
			for i := 0; i < len(s); i++ {
				if s[i] <= ' ' || s[i] >= 0x7f {
					t.Fatalf("the resource URI %q passed with the byte 0x%02x", s, s[i])
				}
			}
		}
		out := termsafe.Quote(s, max)
		if !utf8.ValidString(out) || termsafe.Has(out) {
			t.Fatalf("Quote(%q, %d) = %q is not safe to show", s, max, out)
		}
		m := max
		if m <= 0 {
			m = termsafe.DefaultMax
		}
		if n := utf8.RuneCountInString(out); n > 10*m+30 {
			t.Fatalf("Quote of %d runes, max %d, gave %d runes", utf8.RuneCountInString(s), max, n)
		}
		// Every error says something, and quotes what it shows.
		for _, err := range []error{tool, Resource(s), ResourceURI(s)} {
			if err != nil && (err.Error() == "" || termsafe.Has(err.Error())) {
				t.Fatalf("error for %q: %q", s, err)
			}
		}
	})
}
