// Package termsafe makes a string that pml did not write safe to show a
// person: on a terminal, in a log line, in the client's approval dialog.
// Strings from a repository (.pml.json's server args, hosts, images), a
// server (tool names and descriptions) or a registry can hold escape
// sequences that erase or rewrite what the person reviews (ESC [2K, a
// carriage return, a newline that starts a fake line), or Unicode bidi
// controls that reorder it; invisible characters (zero-width spaces and
// joiners, a BOM, a soft hyphen, tag characters, variation selectors,
// combining marks) that make two different strings look the same or hide
// text; and they can be long enough to push the real line off the screen.
//
// Quote shows every such character as a Go-style escape (\x1b, \r, \n,
// \u202e, \U000e0041) and keeps at most max runes of the string, then says
// how many more there were: "…(N more)".
package termsafe

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultMax is the number of runes Quote keeps when it is given max <= 0:
// enough for a command line or a URL, short of a screenful.
const DefaultMax = 200

// Quote returns s with every character Unsafe reports quoted, and every
// invalid UTF-8 byte as \xNN, keeping at most max runes of s (DefaultMax
// when max <= 0) followed by "…(N more)". The result holds none of those
// characters, and at most 10*max + len("…(N more)") runes (each rune kept
// becomes at most ten: \U000e0041).
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
			// \u and four hex digits, or \U and eight past U+FFFF, as Go
			// writes them: "\ue0041" would read as U+E004 and a "1".
			h := strconv.FormatInt(int64(r), 16)
			if r > 0xffff {
				b.WriteString(`\U`)
				b.WriteString(strings.Repeat("0", 8-len(h)))
			} else {
				b.WriteString(`\u`)
				b.WriteString(strings.Repeat("0", 4-len(h)))
			}
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
// what follows it, or is not shown at all, so that what a person reads is
// not what the string holds: a control character (C0, DEL, C1), a line or
// paragraph separator, a format character (Unicode category Cf: the bidi
// controls U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C, the
// zero-width space, joiners and word joiner U+200B–U+200D, U+2060, the BOM
// U+FEFF, the soft hyphen U+00AD, the tag characters), anything else of
// the tag block U+E0000–U+E007F, a variation selector (U+FE00–U+FE0F,
// U+E0100–U+E01EF, the Mongolian ones), another default-ignorable
// character (U+034F, U+115F, U+3164, …: shown as nothing), or a combining
// mark (category M: drawn onto the character before it, so "e" and a
// mark can pass for "é", and a stack of them can cover a line).
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	case r < 0xa0:
		// Printable ASCII: the common case, decided without a table.
		return false
	case r >= 0xe0000 && r <= 0xe007f:
		return true
	}
	return unicode.In(r, unicode.Cf, unicode.M, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
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
