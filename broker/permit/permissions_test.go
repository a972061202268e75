package permit

import (
	"strings"
	"testing"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/wirename"
)

func TestDecide(t *testing.T) {
	p := Permissions{
		Allow: []string{"filesystem:*", "git:status", "*:list", "shell:exec"},
		Ask:   []string{"filesystem:write_file", "shell:*"},
		Deny:  []string{"shell:rm", "danger:*"},
	}
	cases := []struct {
		name, tool string
		want       call.Decision
		pattern    string
	}{
		{"a namespace wildcard allows its tools", "filesystem:read_file", call.Allow, "filesystem:*"},
		{"ask beats allow", "filesystem:write_file", call.Ask, "filesystem:write_file"},
		{"deny beats ask", "shell:rm", call.Deny, "shell:rm"},
		{"ask wildcard", "shell:run", call.Ask, "shell:*"},
		{"exact allow", "git:status", call.Allow, "git:status"},
		{"an action wildcard matches across namespaces", "memory:list", call.Allow, "*:list"},
		{"a tool matching nothing is asked", "git:push", call.Ask, ""},
		{"deny namespace", "danger:anything", call.Deny, "danger:*"},
		{"a wildcard does not match a prefix of another namespace", "filesystemx:read", call.Ask, ""},
		{"an empty name matches nothing", "", call.Ask, ""},
		{"an exact allow (an Always answer) beats a wildcard ask", "shell:exec", call.Allow, "shell:exec"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, pat := p.Decide(c.tool)
			if got != c.want || pat != c.pattern {
				t.Errorf("Decide(%q) = %s %q, want %s %q", c.tool, got, pat, c.want, c.pattern)
			}
		})
	}
}

func TestStarAllowsEverythingButDenyStillWins(t *testing.T) {
	p := Permissions{Allow: []string{"*"}, Deny: []string{"shell:exec"}}
	if d, _ := p.Decide("anything:at_all"); d != call.Allow {
		t.Errorf("* should allow, got %s", d)
	}
	if d, _ := p.Decide("shell:exec"); d != call.Deny {
		t.Errorf("deny should win over *, got %s", d)
	}
}

func TestAMalformedPatternMatchesNothing(t *testing.T) {
	p := Permissions{Allow: []string{"[filesystem:*"}}
	if d, pat := p.Decide("filesystem:read_file"); d != call.Ask || pat != "" {
		t.Errorf("got %s %q", d, pat)
	}
}

func TestDefaultPermissionsAllowReadsAndAskWrites(t *testing.T) {
	p := DefaultPermissions()
	for tool, want := range map[string]call.Decision{
		"filesystem:read_file":      call.Allow,
		"filesystem:list_directory": call.Allow,
		"filesystem:write_file":     call.Ask,
		"filesystem:move_file":      call.Ask,
		"shell:exec":                call.Ask,
	} {
		if got, _ := p.Decide(tool); got != want {
			t.Errorf("default %s = %s, want %s", tool, got, want)
		}
	}
}

// TestPatternsMatchEveryNameFormAndCase: a pattern copied from wherever
// pml shows a tool (pml's name, the MCP wire name, Claude Code's or
// codex's mcp__pml__ name), in any case, decides like pml's own name, in
// deny, ask and allow alike. Before, only pml's own lower-case name
// matched, and a deny written any other way let the tool run.
func TestPatternsMatchEveryNameFormAndCase(t *testing.T) {
	forms := []string{
		"shell:exec", "shell__exec", "mcp__pml__shell__exec",
		"SHELL:EXEC", "Shell__Exec", "MCP__PML__SHELL__EXEC", " shell:exec ",
		// Globs in each form.
		"shell:*", "shell__*", "mcp__pml__shell__*", "SHELL:*", "mcp__pml__*", "*:exec", "*__exec", "sh*",
	}
	for _, form := range forms {
		for _, c := range []struct {
			list string
			p    Permissions
			want call.Decision
		}{
			{"deny", Permissions{Allow: []string{"*"}, Deny: []string{form}}, call.Deny},
			{"ask", Permissions{Allow: []string{"*"}, Ask: []string{form}}, call.Ask},
			{"allow", Permissions{Allow: []string{form}}, call.Allow},
		} {
			t.Run(c.list+" "+form, func(t *testing.T) {
				if got, pat := c.p.Decide("shell:exec"); got != c.want || pat != form {
					t.Errorf("Decide(shell:exec) = %s %q, want %s %q", got, pat, c.want, form)
				}
				// The pattern names this tool only (mcp__pml__* names
				// every tool of pml).
				if got, _ := c.p.Decide("filesystem:read_file"); got == c.want && c.want != call.Allow && form != "mcp__pml__*" {
					t.Errorf("%s %q also decided filesystem:read_file", c.list, form)
				}
			})
		}
	}
}

// TestExactNamesInAnyFormKeepTheirPrecedence: "exact" in Decide's order
// (an exact ask beats an exact allow, which beats a glob ask) holds for
// an exact name in any form and case.
func TestExactNamesInAnyFormKeepTheirPrecedence(t *testing.T) {
	for _, exact := range []string{"shell:exec", "shell__exec", "mcp__pml__shell__exec", "SHELL:EXEC"} {
		t.Run(exact, func(t *testing.T) {
			p := Permissions{Allow: []string{exact}, Ask: []string{"shell:*"}}
			if d, pat := p.Decide("shell:exec"); d != call.Allow || pat != exact {
				t.Errorf("an exact allow should beat a glob ask: %s %q", d, pat)
			}
			p = Permissions{Allow: []string{"shell:exec"}, Ask: []string{exact}}
			if d, pat := p.Decide("shell:exec"); d != call.Ask || pat != exact {
				t.Errorf("an exact ask should beat an exact allow: %s %q", d, pat)
			}
		})
	}
}

// TestPatternsDoNotOvermatch: reading wire names back does not make a
// pattern match tools it does not name.
func TestPatternsDoNotOvermatch(t *testing.T) {
	for _, c := range []struct{ pattern, tool string }{
		{"shell__exec", "shell:exec2"},
		{"shell__exec", "shellx:exec"},
		{"mcp__pml__shell__exec", "filesystem:read_file"},
		{"filesystem__*", "shell:exec"},
		{"mcp__other__shell__exec", "shell:exec"},
		{"exec", "shell:exec"},
	} {
		p := Permissions{Deny: []string{c.pattern}}
		if d, _ := p.Decide(c.tool); d == call.Deny {
			t.Errorf("deny %q denied %s", c.pattern, c.tool)
		}
	}
}

// TestPatternsMatchAShortenedWireName: a tool whose name needs shortening
// on the wire (internal/wirename) is matched by that wire name too.
func TestPatternsMatchAShortenedWireName(t *testing.T) {
	tool := "srv:get.thing"
	w := wirename.Encode(tool)
	if w == "srv__get.thing" || !strings.HasPrefix(w, "srv__get-thing_") {
		t.Fatalf("the test expects a shortened wire name, got %q", w)
	}
	for _, pat := range []string{w, "mcp__pml__" + w, strings.ToUpper(w), "srv__get-thing_*", "srv:*"} {
		p := Permissions{Allow: []string{"*"}, Deny: []string{pat}}
		if d, _ := p.Decide(tool); d != call.Deny {
			t.Errorf("deny %q did not deny %s (wire %s): %s", pat, tool, w, d)
		}
	}
	// A server may name a tool with '/': a wildcard still spans it.
	p := Permissions{Deny: []string{"srv:*"}}
	if d, _ := p.Decide("srv:a/b"); d != call.Deny {
		t.Errorf("srv:* did not deny srv:a/b: %s", d)
	}
}
