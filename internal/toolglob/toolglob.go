// Package toolglob reads the tool name patterns of permissions
// (.pml.json's permissions.allow, ask and deny).
//
// A person copies a tool's name from wherever pml showed it: pml's own
// form (shell:exec), the MCP wire name clients list (shell__exec, see
// internal/wirename), or the name Claude Code and codex show, with their
// server prefix (mcp__pml__shell__exec). A pattern written in any of
// these forms, in any case, must match the tool: a deny that silently
// matches nothing fails open. So a pattern matches a tool when it matches
// any of the tool's names, compared in lower case; a pattern in the wire
// form is also read back into pml's form (shell__* is shell:*).
package toolglob

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/pml-dev/pml/internal/wirename"
)

// ClientPrefix starts the name MCP clients that group tools by server
// (Claude Code, codex) show for a tool of the server "pml".
const ClientPrefix = "mcp__pml__"

// Normalize returns pattern in pml's own form, lower-case: surrounding
// blanks and a leading ClientPrefix go, and a wire name (ns__action, no
// ':') is read back as ns:action the way wirename.Decode splits it. Glob
// characters stay where they are, so "shell__*" becomes "shell:*".
func Normalize(pattern string) string {
	s := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(pattern)), ClientPrefix)
	if strings.Contains(s, ":") {
		return s
	}
	// wirename.Decode refuses glob characters; the split is the same.
	if ns, action, ok := strings.Cut(s, wirename.Sep); ok && ns != "" && action != "" && !strings.HasSuffix(ns, "_") {
		return ns + ":" + action
	}
	return s
}

// Check reports why pml cannot use pattern: it is empty, or it is not a
// glob path.Match reads (an unclosed '[', a trailing '\'). Such a pattern
// would match nothing, which for a deny is the silent miss this package
// exists to prevent, so configuration loading refuses it.
func Check(pattern string) error {
	if strings.TrimSpace(pattern) == "" {
		return errors.New(`is empty: it names no tool; remove it, or write a tool name or glob such as "shell:exec" or "filesystem:*"`)
	}
	// path.Match checks the whole pattern even when it does not match.
	for _, p := range []string{Normalize(pattern), lower(pattern)} {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf(`%q is not a pattern pml can read (%v): close every '[' with ']' and do not end it with '\'; use * and ? as wildcards, such as "shell:*"`, pattern, err)
		}
	}
	return nil
}

// lower is the pattern as written, in lower case, without surrounding
// blanks: what is compared with the tool's wire and client names.
func lower(pattern string) string { return strings.ToLower(strings.TrimSpace(pattern)) }

// names are the forms of tool a person may have copied, lower-case: pml's
// own, the wire name, and the client's (ClientPrefix + wire name).
func names(tool string) [3]string {
	if n, ok := known.Load(tool); ok {
		return n.([3]string)
	}
	w := strings.ToLower(wirename.Encode(tool))
	n := [3]string{strings.ToLower(tool), w, ClientPrefix + w}
	if knownCount.Load() < maxKnown {
		// Every permission check of every call asks for the same few
		// tools' names: built once each (a bounded number: a client may
		// name any tool).
		if _, loaded := known.LoadOrStore(tool, n); !loaded {
			knownCount.Add(1)
		}
	}
	return n
}

// known holds the names of up to maxKnown tools (names).
var (
	known      sync.Map
	knownCount atomic.Int64
)

const maxKnown = 4096

// Meta are the characters a pattern reads as wildcards ('*', '?', a class
// '[…]') or as the escape of the next character ('\').
const Meta = `*?[\`

// Escape returns the pattern that names tool and nothing else: each of
// Meta in it is escaped with '\', so a tool a server named "*" is saved
// as `evil:\*`, which matches evil:* alone and not evil:delete_all. What
// "Always" writes to permissions.allow (broker/approve).
func Escape(tool string) string {
	if !strings.ContainsAny(tool, Meta) {
		return tool
	}
	// By byte: Meta is ASCII, which no byte of a longer UTF-8 sequence
	// is, and an invalid byte stays as it was.
	var b strings.Builder
	for i := 0; i < len(tool); i++ {
		if strings.IndexByte(Meta, tool[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(tool[i])
	}
	return b.String()
}

// Literal returns the name pattern stands for when it holds no wildcard,
// its escapes removed (`evil:\*` is evil:*), and false when a '*', '?' or
// '[' in it is a wildcard, or it ends with a lone '\'.
func Literal(pattern string) (string, bool) {
	if !strings.ContainsAny(pattern, Meta) {
		return pattern, true
	}
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*', '?', '[':
			return "", false
		case '\\':
			if i+1 == len(pattern) {
				return "", false
			}
			i++
			b.WriteByte(pattern[i])
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// Exact reports whether pattern names tool itself, in any of its forms
// and any case, without a wildcard doing the work: "SHELL:EXEC",
// "shell__exec" and "mcp__pml__shell__exec" all name shell:exec, and the
// escaped `evil:\*` names evil:* (Escape). An exact name outranks a glob
// in permissions (broker.Permissions.Decide).
func Exact(pattern, tool string) bool {
	if tool == "" {
		return false
	}
	return exactNames(pattern, names(tool))
}

// exactNames is Exact for the names of a tool.
func exactNames(pattern string, n [3]string) bool {
	if l, ok := Literal(Normalize(pattern)); ok && l == n[0] {
		return true
	}
	l, ok := Literal(lower(pattern))
	return ok && (l == n[1] || l == n[2])
}

// Match reports whether pattern matches tool: exactly (Exact), or as a
// glob on any of its forms. A pattern Check refuses matches nothing.
func Match(pattern, tool string) bool {
	if tool == "" {
		return false
	}
	n := names(tool)
	if exactNames(pattern, n) {
		return true
	}
	for _, p := range []string{Normalize(pattern), lower(pattern)} {
		for _, name := range n {
			if glob(p, name) {
				return true
			}
		}
	}
	return false
}

// glob is path.Match with '/' an ordinary character: a server may name a
// tool "a/b", and "srv:*" (or a deny "*") must still match it.
func glob(pattern, name string) bool {
	const slash = "\x00"
	ok, err := path.Match(strings.ReplaceAll(pattern, "/", slash), strings.ReplaceAll(name, "/", slash))
	return err == nil && ok
}

// CoversNamespace reports whether pattern matches every tool the
// namespace ns can have, whatever its actions are called: "*", "ns:*",
// "ns__*", "mcp__pml__ns__*", "*:*", "n*". A server a capability
// requires (its mcp_deps) is refused up front only by such a pattern:
// it is the one answer that holds for tools not listed yet. The test
// is by the pattern's shape and errs towards false: a pattern that
// matches some actions only, or whose reach cannot be read off its
// shape, is not a cover (each call is then decided on its own).
func CoversNamespace(pattern, ns string) bool {
	if ns == "" || !utf8.ValidString(ns) || Check(pattern) != nil {
		return false
	}
	// Every tool of ns has a name (pml's form, lower case) that starts
	// with prefix. A pattern q* where q matches a start of prefix
	// matches all of them: the trailing * takes the rest, '/' included
	// (glob).
	prefix := strings.ToLower(ns) + ":"
	for _, p := range []string{Normalize(pattern), lower(pattern)} {
		q, ok := strings.CutSuffix(p, "*")
		if !ok {
			continue
		}
		for k := 0; k <= len(prefix); k++ {
			// Only whole characters: a start cut inside one is an
			// invalid byte, which a class such as [\xde] (itself no
			// valid character) would match as the fuzzer found.
			if k < len(prefix) && !utf8.RuneStart(prefix[k]) {
				continue
			}
			if glob(q, prefix[:k]) {
				return true
			}
		}
	}
	return false
}
