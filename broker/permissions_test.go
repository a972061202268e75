package broker

import "testing"

func TestDecide(t *testing.T) {
	p := Permissions{
		Allow: []string{"filesystem:*", "git:status", "*:list", "shell:exec"},
		Ask:   []string{"filesystem:write_file", "shell:*"},
		Deny:  []string{"shell:rm", "danger:*"},
	}
	cases := []struct {
		name, tool string
		want       Decision
		pattern    string
	}{
		{"a namespace wildcard allows its tools", "filesystem:read_file", Allow, "filesystem:*"},
		{"ask beats allow", "filesystem:write_file", Ask, "filesystem:write_file"},
		{"deny beats ask", "shell:rm", Deny, "shell:rm"},
		{"ask wildcard", "shell:run", Ask, "shell:*"},
		{"exact allow", "git:status", Allow, "git:status"},
		{"an action wildcard matches across namespaces", "memory:list", Allow, "*:list"},
		{"a tool matching nothing is asked", "git:push", Ask, ""},
		{"deny namespace", "danger:anything", Deny, "danger:*"},
		{"a wildcard does not match a prefix of another namespace", "filesystemx:read", Ask, ""},
		{"an empty name matches nothing", "", Ask, ""},
		{"an exact allow (an Always answer) beats a wildcard ask", "shell:exec", Allow, "shell:exec"},
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
	if d, _ := p.Decide("anything:at_all"); d != Allow {
		t.Errorf("* should allow, got %s", d)
	}
	if d, _ := p.Decide("shell:exec"); d != Deny {
		t.Errorf("deny should win over *, got %s", d)
	}
}

func TestAMalformedPatternMatchesNothing(t *testing.T) {
	p := Permissions{Allow: []string{"[filesystem:*"}}
	if d, pat := p.Decide("filesystem:read_file"); d != Ask || pat != "" {
		t.Errorf("got %s %q", d, pat)
	}
}

func TestDefaultPermissionsAllowReadsAndAskWrites(t *testing.T) {
	p := DefaultPermissions()
	for tool, want := range map[string]Decision{
		"filesystem:read_file":      Allow,
		"filesystem:list_directory": Allow,
		"filesystem:write_file":     Ask,
		"filesystem:move_file":      Ask,
		"shell:exec":                Ask,
	} {
		if got, _ := p.Decide(tool); got != want {
			t.Errorf("default %s = %s, want %s", tool, got, want)
		}
	}
}
