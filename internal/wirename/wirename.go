// Package wirename maps pml's tool names (namespace:action) to the names
// tools carry on the MCP wire, and back.
//
// MCP clients and the model APIs behind them accept only tool names
// matching ^[a-zA-Z0-9_-]{1,64}$, so "filesystem:read_file" cannot be
// sent as is. The wire name joins the two parts with "__":
// filesystem__read_file. A namespace may itself contain "_", so the
// scheme is exact (reversible by splitting at the first "__") only when
// the namespace holds no "__" and does not end with "_"; the action may
// hold anything valid. Every other name (a character outside the set, an
// ambiguous namespace, more than 64 characters) is shortened
// deterministically: a sanitized prefix and a hash of the full name. Such
// a name is reversible only through the Table that handed it out.
package wirename

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"sync"
)

// MaxLen is the longest wire name.
const MaxLen = 64

// Sep joins namespace and action on the wire.
const Sep = "__"

// Pattern is the rule every wire name follows.
var Pattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// hashLen hex digits of SHA-256 end a shortened name (after "_").
const hashLen = 8

func validPart(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// exact returns the exact (table-free) wire name of a namespace:action
// name, or false when the name needs shortening.
func exact(name string) (string, bool) {
	ns, action, ok := strings.Cut(name, ":")
	if !ok || !validPart(ns) || !validPart(action) {
		return "", false
	}
	if strings.Contains(ns, Sep) || strings.HasSuffix(ns, "_") {
		// "a_" + "__" + "b" reads back as "a:_b": not reversible.
		return "", false
	}
	w := ns + Sep + action
	if len(w) > MaxLen {
		return "", false
	}
	return w, true
}

// Encode returns the wire name of a pml tool name (namespace:action).
// A name without ":" is encoded as EncodeBare does.
func Encode(name string) string {
	if !strings.Contains(name, ":") {
		return EncodeBare(name)
	}
	if w, ok := exact(name); ok {
		return w
	}
	return shorten(strings.Replace(name, ":", Sep, 1), name, 0)
}

// EncodeBare returns the wire name of a name shown without its namespace
// (`pml run` shows one capability's actions): itself when valid, else
// shortened.
func EncodeBare(name string) string {
	if validPart(name) && len(name) <= MaxLen {
		return name
	}
	return shorten(name, name, 0)
}

// Decode reverses Encode for names it encoded exactly: it splits at the
// first "__". It reports false for a wire name that is not of that form
// (a shortened name must be looked up in the Table that made it).
func Decode(wire string) (string, bool) {
	// (Pattern, without the regular expression: a traced call decodes its
	// tool's name on every call.)
	if len(wire) > MaxLen || !validPart(wire) {
		return "", false
	}
	ns, action, ok := strings.Cut(wire, Sep)
	if !ok || ns == "" || action == "" || strings.HasSuffix(ns, "_") {
		return "", false
	}
	return ns + ":" + action, true
}

// shorten makes a valid name from body (characters outside the set
// become "-") cut to fit, then "_" and a hash of the full name (and the
// salt, which only a collision in one Table raises).
func shorten(body, full string, salt int) string {
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		if validPart(string(c)) {
			b.WriteByte(c)
		} else {
			b.WriteByte('-')
		}
	}
	s := b.String()
	if max := MaxLen - 1 - hashLen; len(s) > max {
		s = s[:max]
	}
	h := sha256.New()
	h.Write([]byte(full))
	for i := 0; i < salt; i++ {
		h.Write([]byte{0})
	}
	return s + "_" + hex.EncodeToString(h.Sum(nil))[:hashLen]
}

// Shortened reports whether a wire name has the form of a shortened one
// (ends in "_" and hashLen hex digits), which only a Table that handed it
// out, or one that computed the same names, reads back.
func Shortened(wire string) bool {
	i := len(wire) - hashLen - 1
	if i < 1 || wire[i] != '_' {
		return false
	}
	for _, c := range wire[i+1:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Table remembers the wire names it handed out, so a shortened name
// reads back, and two names never share a wire name. Safe for concurrent
// use.
type Table struct {
	bare   bool
	mu     sync.Mutex
	toWire map[string]string
	toName map[string]string
}

// NewTable returns a table for namespace:action names, or for bare names
// (EncodeBare) when bare is set.
func NewTable(bare bool) *Table {
	return &Table{bare: bare, toWire: map[string]string{}, toName: map[string]string{}}
}

// Wire returns name's wire name and records it.
func (t *Table) Wire(name string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w, ok := t.toWire[name]; ok {
		return w
	}
	w := Encode(name)
	if t.bare {
		w = EncodeBare(name)
	}
	// A wire name another name already holds (a hash collision, or a
	// shortened name equal to another's exact one) gets a new hash.
	for salt := 1; t.toName[w] != "" && t.toName[w] != name; salt++ {
		body := strings.Replace(name, ":", Sep, 1)
		w = shorten(body, name, salt)
	}
	t.toWire[name], t.toName[w] = w, name
	return w
}

// Peek returns name's wire name as Wire does, without recording it: the
// recorded one, else the encoding (which a later Wire may salt).
func (t *Table) Peek(name string) string {
	t.mu.Lock()
	w, ok := t.toWire[name]
	t.mu.Unlock()
	if ok {
		return w
	}
	if t.bare {
		return EncodeBare(name)
	}
	return Encode(name)
}

// Name returns the pml name of a wire name: the recorded one, else the
// exact scheme's (Decode; for a bare table the name itself when valid).
func (t *Table) Name(wire string) (string, bool) {
	t.mu.Lock()
	n, ok := t.toName[wire]
	t.mu.Unlock()
	if ok {
		return n, true
	}
	if t.bare {
		return wire, Pattern.MatchString(wire)
	}
	return Decode(wire)
}
