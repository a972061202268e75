// Package mcpname checks the names a server, the cloud or a registry
// chooses for what pml lists: tools, prompts and resources. Such a name
// reaches the person (the client's tool list, approvals, pml tools, the
// audit log) and the permission patterns (internal/toolglob) as the server
// wrote it, so pml lists only names that mean one thing: a tool named "*"
// would turn one "Always" into an allow of the whole server, and a name
// holding a zero-width space or a combining mark passes for another on
// screen.
//
// The rule is MCP's for tool names (specification 2025-11-25, "Tool
// names"; SEP-986): 1 to 128 characters, case-sensitive, ASCII letters,
// digits, '_', '-', '.', and '/' (SEP-986 allows it; pml's patterns treat
// it as an ordinary character). MCP writes it as a SHOULD, and servers
// in use go past it with visible ASCII (the go-sdk's own "everything"
// example lists "elicit (form)"): so a name is also listed when it holds
// only printable ASCII, with no space at either end, none of the
// pattern language's characters (toolglob.Meta: '*', '?', '[', '\') and
// no ':' (pml's namespace separator). What the rule is for holds either
// way: a name means one thing in a pattern and on screen. MCP sets no rule for prompt names; a
// prompt is got by its name as a tool is called by its, so pml holds it
// to the same one. A resource's name is display text and may hold spaces
// and letters of any script, but no character internal/termsafe quotes,
// and its URI is an RFC 3986 URI: printable ASCII, with a scheme.
package mcpname

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/pml-dev/pml/internal/termsafe"
)

// MaxLen is the longest tool or prompt name, in characters (bytes: every
// character allowed is ASCII).
const MaxLen = 128

// MaxResourceName and MaxURI bound a resource's name (runes) and URI
// (bytes): long enough for any honest one, short of a screenful.
const (
	MaxResourceName = 256
	MaxURI          = 2048
)

// Tool reports why name is not a tool name MCP's rule allows, or nil.
func Tool(name string) error { return ruleName("tool", name) }

// Prompt reports why name is not a prompt name pml lists, or nil: the
// tool rule.
func Prompt(name string) error { return ruleName("prompt", name) }

func ruleName(what, name string) error {
	if name == "" {
		return fmt.Errorf("the %s name is empty", what)
	}
	for i := 0; i < len(name); i++ {
		if !allowed(name[i]) && !visible(name[i]) {
			r, _ := utf8.DecodeRuneInString(name[i:])
			return fmt.Errorf("the %s name %s holds %s, outside MCP's rule (ASCII letters, digits, '_', '-', '.', '/'; pml also lists a space and parentheses)", what, quoted(name), shownRune(r, name[i]))
		}
	}
	if name[0] == ' ' || name[len(name)-1] == ' ' {
		return fmt.Errorf("the %s name %s starts or ends with a space, which no one sees", what, quoted(name))
	}
	if len(name) > MaxLen {
		return fmt.Errorf("the %s name %s is %d characters long, more than MCP's %d", what, quoted(name), len(name), MaxLen)
	}
	return nil
}

// quoted is name as pml shows it: in double quotes, every character
// termsafe quotes escaped, cut after 80 characters.
func quoted(name string) string { return `"` + termsafe.Quote(name, 80) + `"` }

// allowed is the tool rule's character set.
func allowed(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/'
}

// visible is what servers in use put in tool names past MCP's rule
// ("elicit (form)"): words and parentheses.
func visible(c byte) bool { return c == ' ' || c == '(' || c == ')' }

// shownRune names the first character a name may not hold.
func shownRune(r rune, b byte) string {
	switch {
	case r == utf8.RuneError:
		return fmt.Sprintf("the byte 0x%02x (not UTF-8)", b)
	case termsafe.Unsafe(r), r == ' ':
		return fmt.Sprintf("%U", r)
	}
	return fmt.Sprintf("%q (%U)", r, r)
}

// Resource reports why name is not a resource name pml lists, or nil:
// empty, longer than MaxResourceName, invalid UTF-8, or holding a
// character termsafe quotes (a control, a bidi control, an invisible
// character, a combining mark).
func Resource(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return fmt.Errorf("the resource name %q is blank", name)
	case utf8.RuneCountInString(name) > MaxResourceName:
		return fmt.Errorf("the resource name %s is longer than %d characters", quoted(name), MaxResourceName)
	case termsafe.Has(name):
		return fmt.Errorf("the resource name %s holds a control, bidi or invisible character, or a combining mark", quoted(name))
	}
	return nil
}

// ResourceURI reports why uri is not a resource URI pml lists, or nil: it
// must be an RFC 3986 URI (printable ASCII, no space; non-ASCII is
// percent-encoded) of at most MaxURI bytes with a scheme (a letter, then
// letters, digits, '+', '-', '.'; then ':').
func ResourceURI(uri string) error {
	switch {
	case uri == "":
		return fmt.Errorf("the resource URI is empty")
	case len(uri) > MaxURI:
		return fmt.Errorf("the resource URI %s is longer than %d bytes", quoted(uri), MaxURI)
	}
	for i := 0; i < len(uri); i++ {
		if c := uri[i]; c <= ' ' || c >= 0x7f {
			r, _ := utf8.DecodeRuneInString(uri[i:])
			return fmt.Errorf("the resource URI %s holds %s: a URI is printable ASCII, anything else percent-encoded", quoted(uri), shownRune(r, c))
		}
	}
	scheme, _, ok := strings.Cut(uri, ":")
	if !ok || scheme == "" || !isAlpha(scheme[0]) {
		return fmt.Errorf("the resource URI %s has no scheme (such as file: or https:)", quoted(uri))
	}
	for i := 1; i < len(scheme); i++ {
		if c := scheme[i]; !isAlpha(c) && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.' {
			return fmt.Errorf("the resource URI %s has no scheme (such as file: or https:)", quoted(uri))
		}
	}
	return nil
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
