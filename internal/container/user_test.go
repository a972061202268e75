package container

import "testing"

func TestChooseUserPicksTheWorkspaceOwner(t *testing.T) {
	root := Ident{0, 0}
	alice := Ident{1000, 1000}
	bob := Ident{1001, 100}
	cases := []struct {
		name              string
		explicit          string
		invoking, wsOwner Ident
		want              string
	}{
		{"an unprivileged caller runs as itself", "", alice, bob, "1000:1000"},
		{"root falls back to the workspace owner", "", root, bob, "1001:100"},
		{"root with a root-owned workspace runs as root (capabilities dropped by the policy)", "", root, root, "0:0"},
		{"an explicit sandbox.user wins", "2000:2000", alice, bob, "2000:2000"},
		{"an explicit user wins even for root", "1234:5678", root, root, "1234:5678"},
		{"a caller with uid 0 but another gid is still root", "", Ident{0, 1000}, Ident{0, 5}, "0:5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ChooseUser(c.explicit, c.invoking, c.wsOwner); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
	if c := Choose("", root, root, false); c.User != "65534:65534" {
		t.Errorf("root with an unknown owner: got %s, want nobody", c.User)
	}
	for _, u := range []string{"0:0", "0", "root", "0:1000"} {
		if !IsRoot(u) {
			t.Errorf("IsRoot(%q) = false", u)
		}
	}
	for _, u := range []string{"1000:0", "65534:65534", "10:10"} {
		if IsRoot(u) {
			t.Errorf("IsRoot(%q) = true", u)
		}
	}
}

func TestOwnerLabelsRoundTrip(t *testing.T) {
	self := Self()
	if self.Start == 0 || self.Host == "" {
		t.Fatalf("Self() = %+v", self)
	}
	back, ok := OwnerFromLabels(self.Labels())
	if !ok || back != self {
		t.Fatalf("round trip: %+v %v", back, ok)
	}
	if !self.Alive() {
		t.Error("the running test process is not alive?")
	}
	dead := self
	dead.Start++ // same pid, other start time: a reused pid
	if dead.Alive() {
		t.Error("a reused pid must not count as the owner")
	}
	if _, ok := OwnerFromLabels(map[string]string{LabelOwnerPID: "12"}); ok {
		t.Error("incomplete labels must not yield an owner")
	}
}

func TestParseStatCopesWithOddCommandNames(t *testing.T) {
	fields := "S 1 1 1 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10"
	for _, comm := range []string{"(pml)", "(a b) c)", "(()", "(Z Z) Z)"} {
		got, state, err := parseStat("42 " + comm + " " + fields)
		if err != nil || got != 987654 || state != 'S' {
			t.Errorf("comm %s: got %d %q %v", comm, got, state, err)
		}
	}
	for _, bad := range []string{"garbage", "42 (pml) S 1 2", "42 (pml) SZ " + fields[2:]} {
		if _, _, err := parseStat(bad); err == nil {
			t.Errorf("%q must fail", bad)
		}
	}
}

// What gets a socket by id (the egress proxy's, the direct path's) is a
// numeric uid:gid, never a name the image resolves.
func TestNumericUserTakesOnlyNumbers(t *testing.T) {
	if uid, gid, err := NumericUser("1000:1001"); err != nil || uid != 1000 || gid != 1001 {
		t.Errorf("1000:1001 → %d %d %v", uid, gid, err)
	}
	for _, u := range []string{"node", "1000", "node:node", ":", ""} {
		if _, _, err := NumericUser(u); err == nil {
			t.Errorf("%q was accepted", u)
		}
	}
}
