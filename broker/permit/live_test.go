package permit

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pml-dev/pml/broker/call"
)

// TestLiveDecisionsFollowEveryChange: Decide remembers its answers, and
// no answer outlives the permissions it came from: a reload (Replace)
// and an "always" (Change, even one that fails part way) are seen by the
// very next call.
func TestLiveDecisionsFollowEveryChange(t *testing.T) {
	l := NewLivePermissions(Permissions{Allow: []string{"fs:*"}}, "test")
	want := func(tool string, d call.Decision, pattern string) {
		t.Helper()
		for range 2 { // once decided, once remembered
			if got, pat := l.Decide(tool); got != d || pat != pattern {
				t.Fatalf("Decide(%s) = %s %q, want %s %q", tool, got, pat, d, pattern)
			}
		}
	}
	want("fs:read", call.Allow, "fs:*")
	want("shell:exec", call.Ask, "")

	if _, ok := l.Replace(Permissions{Allow: []string{"fs:*"}, Deny: []string{"fs:read"}}, "test", l.Generation()); !ok {
		t.Fatal("the reload was not applied")
	}
	want("fs:read", call.Deny, "fs:read")

	_ = l.Change(func(p *Permissions) error {
		p.Allow = append(append([]string(nil), p.Allow...), "shell:exec")
		return nil
	})
	want("shell:exec", call.Allow, "shell:exec")

	_ = l.Change(func(p *Permissions) error {
		p.Deny = nil
		return errors.New("the write failed after p changed")
	})
	want("fs:read", call.Allow, "fs:*")
}

// TestLiveDecisionsRememberABoundedNumberOfNames: a client calling
// ever new names does not grow what is remembered past maxDecided, and
// the names past it are still decided.
func TestLiveDecisionsRememberABoundedNumberOfNames(t *testing.T) {
	l := NewLivePermissions(Permissions{Deny: []string{"x:*"}}, "test")
	for i := range maxDecided + 10 {
		if d, _ := l.Decide(fmt.Sprintf("x:t%d", i)); d != call.Deny {
			t.Fatalf("x:t%d: %s, want deny", i, d)
		}
	}
	n := 0
	l.decided.Range(func(any, any) bool { n++; return true })
	if n > maxDecided {
		t.Errorf("%d names remembered, more than %d", n, maxDecided)
	}
}
