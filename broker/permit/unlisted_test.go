package permit

import (
	"testing"

	"github.com/pml-dev/pml/broker/call"
)

// A call of a tool its server does not list goes on only when an entry
// of allow names the tool exactly; no wildcard reaches it, an exact ask
// entry beside it asks, one alone reaches nothing, and a deny still wins.
func TestUnlistedNeedsAnExactEntry(t *testing.T) {
	const tool = "modern:test_trigger_tool_change"
	cases := []struct {
		name    string
		p       Permissions
		want    call.Decision
		pattern string
		named   bool
	}{
		{"nothing names it", Permissions{}, call.Deny, "", false},
		{"*", Permissions{Allow: []string{"*"}}, call.Deny, "", false},
		{"SERVER:*", Permissions{Allow: []string{"modern:*"}}, call.Deny, "", false},
		{"a glob on the action", Permissions{Allow: []string{"modern:test_*"}}, call.Deny, "", false},
		{"a ? glob", Permissions{Allow: []string{"modern:test_trigger_tool_chang?"}}, call.Deny, "", false},
		{"a class glob", Permissions{Allow: []string{"modern:[t]est_trigger_tool_change"}}, call.Deny, "", false},
		{"*:ACTION", Permissions{Allow: []string{"*:test_trigger_tool_change"}}, call.Deny, "", false},
		{"the wire form's glob", Permissions{Allow: []string{"mcp__pml__modern__*"}}, call.Deny, "", false},
		{"a wildcard ask", Permissions{Ask: []string{"modern:*"}}, call.Deny, "", false},
		{"the exact allow entry", Permissions{Allow: []string{"modern:*", tool}}, call.Allow, tool, true},
		{"the exact entry in the wire form", Permissions{Allow: []string{"modern__test_trigger_tool_change"}}, call.Allow, "modern__test_trigger_tool_change", true},
		{"the exact entry in the client's form, upper case", Permissions{Allow: []string{"MCP__PML__MODERN__TEST_TRIGGER_TOOL_CHANGE"}}, call.Allow, "MCP__PML__MODERN__TEST_TRIGGER_TOOL_CHANGE", true},
		{"an exact allow beside a wildcard ask", Permissions{Allow: []string{tool}, Ask: []string{"modern:*"}}, call.Allow, tool, true},
		{"an exact ask entry alone does not reach it", Permissions{Allow: []string{"*"}, Ask: []string{tool}}, call.Deny, "", false},
		{"an exact ask entry beside the exact allow asks", Permissions{Allow: []string{"*", tool}, Ask: []string{tool}}, call.Ask, tool, true},
		{"an exact ask beats an exact allow", Permissions{Allow: []string{tool}, Ask: []string{tool}}, call.Ask, tool, true},
		{"an exact deny wins", Permissions{Allow: []string{tool}, Deny: []string{tool}}, call.Deny, tool, true},
		{"a wildcard deny wins", Permissions{Allow: []string{tool}, Deny: []string{"modern:*"}}, call.Deny, "modern:*", true},
		{"another tool's exact entry", Permissions{Allow: []string{"modern:test_trigger_prompt_change"}}, call.Deny, "", false},
		{"an escaped star is no wildcard but names another tool", Permissions{Allow: []string{`modern:\*`}}, call.Deny, "", false},
	}
	for _, c := range cases {
		d, pat, named := c.p.Unlisted(tool)
		if d != c.want || pat != c.pattern || named != c.named {
			t.Errorf("%s: Unlisted(%q) = %s, %q, %v; want %s, %q, %v", c.name, tool, d, pat, named, c.want, c.pattern, c.named)
		}
	}
	// The live set answers the same.
	live := NewLivePermissions(Permissions{Allow: []string{"modern:*", tool}}, "")
	if d, pat, named := live.Unlisted(tool); d != call.Allow || pat != tool || !named {
		t.Errorf("LivePermissions.Unlisted = %s, %q, %v", d, pat, named)
	}
	if _, _, named := live.Unlisted("modern:other"); named {
		t.Error("the wildcard modern:* reached an unlisted tool through the live set")
	}
}
