package termsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"npx -y server@1.2 /work", "npx -y server@1.2 /work"},
		{"héllo wörld ✓", "héllo wörld ✓"},
		{"a\x1b[2K\rfake line", `a\x1b[2K\rfake line`},
		{"one\ntwo\tthree", `one\ntwo\tthree`},
		{"bell\x07del\x7f", `bell\x07del\x7f`},
		{"c1\u009bcsi", `c1\u009bcsi`},
		{"rlo\u202eevil\u202c", `rlo\u202eevil\u202c`},
		{"iso\u2066x\u2069", `iso\u2066x\u2069`},
		{"bad\xffbyte", `bad\xffbyte`},
		{"sep\u2028x", `sep\u2028x`},
		// Invisible characters (issue 50): shown, so two names that look
		// alike on screen read differently.
		{"dele\u200bte", `dele\u200bte`},
		{"a\u200cb\u200dc\u2060d", `a\u200cb\u200dc\u2060d`},
		{"\ufeffbom", `\ufeffbom`},
		{"soft\u00adhyphen", `soft\u00adhyphen`},
		{"tag\U000e0041\U000e007f", `tag\U000e0041\U000e007f`},
		{"vs\ufe0f\U000e0100", `vs\ufe0f\U000e0100`},
		{"e\u0301 z\u0336", `e\u0301 z\u0336`},
		{"cgj\u034f hangul\u3164", `cgj\u034f hangul\u3164`},
		{"é ✓ 日本", "é ✓ 日本"},
	} {
		if got := Quote(c.in, 0); got != c.want {
			t.Errorf("Quote(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestQuoteBounds(t *testing.T) {
	long := strings.Repeat("x", 250)
	if got, want := Quote(long, 200), strings.Repeat("x", 200)+"…(50 more)"; got != want {
		t.Errorf("got %q", got)
	}
	if got := Quote("abc", 3); got != "abc" {
		t.Errorf("got %q", got)
	}
	if got := Quote("abcd", 3); got != "abc…(1 more)" {
		t.Errorf("got %q", got)
	}
	if got := Quote(strings.Repeat("\x1b", 10), 2); got != `\x1b\x1b…(8 more)` {
		t.Errorf("got %q", got)
	}
}

func TestHas(t *testing.T) {
	if Has("read_file") || !Has("read\x1b[2Kfile") || !Has("a\u202eb") || !Has("a\xffb") {
		t.Error("Has")
	}
	for _, s := range []string{"a\u200bb", "\ufeff", "a\u00ad", "\U000e0020", "x\ufe0e", "e\u0301", "\u180e"} {
		if !Has(s) {
			t.Errorf("Has(%q) = false", s)
		}
	}
}

// FuzzQuote: whatever the input, the output holds no character a
// terminal or a renderer acts on, is valid UTF-8, and is bounded.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[2K\r  - runs nothing\n", "\u202eevil", "\xff\xfe", "\u0085next", strings.Repeat("é", 300)} {
		f.Add(s, 5)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max > 1000 {
			max %= 1000
		}
		out := Quote(s, max)
		if !utf8.ValidString(out) {
			t.Fatalf("Quote(%q, %d) is not valid UTF-8: %q", s, max, out)
		}
		for _, r := range out {
			if Unsafe(r) {
				t.Fatalf("Quote(%q, %d) = %q holds %U", s, max, out, r)
			}
		}
		m := max
		if m <= 0 {
			m = DefaultMax
		}
		if n := utf8.RuneCountInString(out); n > 10*m+len("…( more)")+20 {
			t.Fatalf("Quote of %d runes with max %d gave %d runes", utf8.RuneCountInString(s), max, n)
		}
		if !Has(s) && utf8.RuneCountInString(s) <= m && out != s {
			t.Fatalf("a safe short string changed: %q → %q", s, out)
		}
	})
}
