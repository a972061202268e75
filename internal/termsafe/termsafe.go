// Package termsafe makes a string that pml did not write safe to show a
// person: on a terminal, in a log line, in the client's approval dialog.
// Strings from a repository (.pml.json's server args, hosts, images), a
// server (tool names and descriptions) or a registry can hold escape
// sequences that erase or rewrite what the person reviews (ESC [2K, a
// carriage return, a newline that starts a fake line), or Unicode bidi
// controls that reorder it; and they can be long enough to push the real
// line off the screen.
//
// Quote shows every such character as a Go-style escape (\x1b, \r, \n,
// \u202e) and keeps at most max runes of the string, then says how many
// more there were: "…(N more)".
package termsafe

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// DefaultMax is the number of runes Quote keeps when it is given max <= 0:
// enough for a command line or a URL, short of a screenful.
const DefaultMax = 200

// Quote returns s with every control character (C0, DEL, C1), line or
// paragraph separator and bidi control quoted, and every invalid UTF-8
// byte as \xNN, keeping at most max runes of s (DefaultMax when max <= 0)
// followed by "…(N more)". The result holds none of those characters, and
// at most 6*max + len("…(N more)") runes (each rune kept becomes at most
// six: \u202e).
func Quote(s string, max int) string {
	if max <= 0 {
		max = DefaultMax
	}
	if safe(s) && utf8.RuneCountInString(s) <= max {
		return s
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(s); {
		if n == max {
			b.WriteString("…(")
			b.WriteString(strconv.Itoa(utf8.RuneCountInString(s[i:])))
			b.WriteString(" more)")
			break
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteString(hex2(byte(r)))
		case Unsafe(r):
			b.WriteString(`\u`)
			h := strconv.FormatInt(int64(r), 16)
			b.WriteString(strings.Repeat("0", 4-len(h)))
			b.WriteString(h)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
		n++
	}
	return b.String()
}

// Unsafe reports whether r changes how a terminal or a text renderer shows
// what follows it: a control character (C0, DEL, C1), a line or paragraph
// separator, or a bidi control (the embeddings and overrides U+202A–U+202E,
// the isolates U+2066–U+2069, and the marks U+200E, U+200F, U+061C).
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x200e, r == 0x200f, r == 0x061c, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// Has reports whether s holds a character Unsafe reports, or invalid
// UTF-8: a name that holds one is refused rather than quoted.
func Has(s string) bool { return !safe(s) }

func safe(s string) bool {
	for i, r := range s {
		if Unsafe(r) {
			return false
		}
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return false
			}
		}
	}
	return true
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}
