package jsonrpc

// Valid reports whether b is one valid JSON text: the answer of
// encoding/json.Valid, which it replaces on every frame of the fast path
// (Filter.check), at a fraction of its cost (encoding/json's scanner
// steps through a function per byte). Like encoding/json, it reads the
// grammar of RFC 8259 only: the bytes inside strings are not checked to
// be UTF-8, and nesting deeper than encoding/json's limit is invalid.
// FuzzValidIsJSONValid holds the two to the same answer.
func Valid(b []byte) bool {
	_, ok := validDepth(b)
	return ok
}

// validDepth is Valid, and when b is valid the deepest nesting of
// objects and arrays in it (1 for `{}`, 0 for a scalar).
func validDepth(b []byte) (deepest int, ok bool) {
	// The containers open around the current position, innermost last
	// ('{' or '['): on the stack up to a depth no real message reaches.
	var small [64]byte
	open := small[:0]
	i := skipSpace(b, 0)
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return 0, false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(open) >= maxNesting {
				return 0, false
			}
			deepest = max(deepest, len(open)+1)
			end := byte('}')
			if c == '[' {
				end = ']'
			}
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == end {
				i++
				break // an empty one: a whole value
			}
			open = append(open, c)
			if c == '{' {
				if i = memberName(b, i); i < 0 {
					return 0, false
				}
			}
			continue // its first value
		case c == '"':
			i = validString(b, i)
		case c == 't':
			i = literal(b, i, "true")
		case c == 'f':
			i = literal(b, i, "false")
		case c == 'n':
			i = literal(b, i, "null")
		default:
			i = validNumber(b, i)
		}
		if i < 0 {
			return 0, false
		}
		// A value ended at b[i]: what follows it closes containers,
		// starts the next value of one, or ends the text.
		for {
			i = skipSpace(b, i)
			if len(open) == 0 {
				if i != len(b) {
					return 0, false
				}
				return deepest, true
			}
			if i >= len(b) {
				return 0, false
			}
			top := open[len(open)-1]
			if c := b[i]; c == '}' && top == '{' || c == ']' && top == '[' {
				open = open[:len(open)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return 0, false
			}
			i = skipSpace(b, i+1)
			if top == '{' {
				if i = memberName(b, i); i < 0 {
					return 0, false
				}
			}
			break
		}
	}
}

// maxNesting is encoding/json's limit on nesting (its scanner's
// maxNestingDepth): a text that opens more containers is invalid there.
const maxNesting = 10000

// memberName reads `"name" :` and the blanks after it, from b[i]; it
// returns where the member's value starts, or -1.
func memberName(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = validString(b, i); i < 0 {
		return -1
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

// validString returns the index just past the string starting at b[i]
// (a '"'), or -1 when it is not a valid JSON string: a control character
// in it, an escape JSON does not have, or no closing quote.
func validString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1
		case c < 0x20:
			return -1
		case c == '\\':
			j++
			if j >= len(b) {
				return -1
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) {
					return -1
				}
				for _, h := range b[j+1 : j+5] {
					if !isHex(h) {
						return -1
					}
				}
				j += 4
			default:
				return -1
			}
		}
	}
	return -1
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// literal returns the index past word at b[i], or -1.
func literal(b []byte, i int, word string) int {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return -1
	}
	return i + len(word)
}

// validNumber returns the index past the number at b[i], or -1:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if i+1 >= len(b) || !isDigit(b[i+1]) {
			return -1
		}
		i = digits(b, i+1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		i = digits(b, i)
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// digits returns the index past the digits from b[i].
func digits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}
