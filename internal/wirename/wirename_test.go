package wirename

import (
	"fmt"
	"strings"
	"testing"
)

func TestEncodeExamples(t *testing.T) {
	cases := map[string]string{
		"filesystem:read_file":   "filesystem__read_file",
		"shell:exec":             "shell__exec",
		"pml:continue_workflow":  "pml__continue_workflow",
		"my-server:do-it":        "my-server__do-it",
		"_x:y":                   "_x__y",
		"ns:__weird__action__":   "ns____weird__action__",
		"github:create_issue":    "github__create_issue",
		"a_b:c":                  "a_b__c",
		"under_score:tool_name_": "under_score__tool_name_",
	}
	for in, want := range cases {
		if got := Encode(in); got != want {
			t.Errorf("Encode(%q) = %q, want %q", in, got, want)
		}
		if back, ok := Decode(want); !ok || back != in {
			t.Errorf("Decode(%q) = %q, %v; want %q", want, back, ok, in)
		}
	}
}

func TestShortenedNames(t *testing.T) {
	long := "server:" + strings.Repeat("very_long_action_", 6)
	for _, name := range []string{
		long,
		"a_:b",            // ambiguous namespace
		"a__b:c",          // namespace holding the separator
		"my.server:do.it", // characters outside the set
		"ns:with:colon",   // a second colon
		"ns:ünïcode",      // non-ASCII
		"ns:" + "x",       // exact, as control
	} {
		w := Encode(name)
		if !Pattern.MatchString(w) {
			t.Errorf("Encode(%q) = %q, not a valid wire name", name, w)
		}
		if w != Encode(name) {
			t.Errorf("Encode(%q) is not deterministic", name)
		}
		tab := NewTable(false)
		if got := tab.Wire(name); got != w {
			t.Errorf("Table.Wire(%q) = %q, want %q", name, got, w)
		}
		if back, ok := tab.Name(w); !ok || back != name {
			t.Errorf("Table.Name(%q) = %q, %v; want %q", w, back, ok, name)
		}
	}
	if w := Encode(long); len(w) != MaxLen {
		t.Errorf("a long name is cut to %d characters, got %d (%q)", MaxLen, len(w), w)
	}
	if Encode("a_:b") == Encode("a:_b") {
		t.Error("a_:b and a:_b share a wire name")
	}
}

func TestBare(t *testing.T) {
	tab := NewTable(true)
	if w := tab.Wire("read_file"); w != "read_file" {
		t.Errorf("bare read_file -> %q", w)
	}
	w := tab.Wire("do.it")
	if !Pattern.MatchString(w) {
		t.Fatalf("bare do.it -> %q", w)
	}
	if n, ok := tab.Name(w); !ok || n != "do.it" {
		t.Errorf("Name(%q) = %q, %v", w, n, ok)
	}
	if n, ok := tab.Name("other"); !ok || n != "other" {
		t.Errorf("Name(other) = %q, %v", n, ok)
	}
}

// A table never gives two names the same wire name, even when a
// shortened name equals another's exact one.
func TestTableCollision(t *testing.T) {
	victim := "a.b:c"
	w := Encode(victim)
	// A name whose exact encoding is victim's shortened name.
	ns, action, _ := strings.Cut(w, Sep)
	twin := ns + ":" + action
	if Encode(twin) != w {
		t.Fatalf("test setup: %q encodes to %q, not %q", twin, Encode(twin), w)
	}
	tab := NewTable(false)
	w1, w2 := tab.Wire(twin), tab.Wire(victim)
	if w1 == w2 {
		t.Fatalf("both got %q", w1)
	}
	for name, wire := range map[string]string{twin: w1, victim: w2} {
		if !Pattern.MatchString(wire) {
			t.Errorf("%q -> invalid %q", name, wire)
		}
		if back, _ := tab.Name(wire); back != name {
			t.Errorf("Name(%q) = %q, want %q", wire, back, name)
		}
	}
}

// FuzzRoundTrip: every name gets a valid wire name that reads back
// through its table; exact names read back without one; and every wire
// name Decode accepts encodes back to itself (so no two names share it).
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"filesystem:read_file", "a_:b", "a:_b", "a___b", "x__y__z", "ns:" + strings.Repeat("z", 80), "é:ü", ":", "a:", ":b", "plain"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		w := Encode(name)
		if !Pattern.MatchString(w) {
			t.Fatalf("Encode(%q) = %q: invalid", name, w)
		}
		tab := NewTable(false)
		if back, ok := tab.Name(tab.Wire(name)); !ok || back != name {
			t.Fatalf("table round trip of %q gave %q, %v", name, back, ok)
		}
		if _, ok := exact(name); ok {
			if back, ok := Decode(w); !ok || back != name {
				t.Fatalf("Decode(Encode(%q)) = %q, %v", name, back, ok)
			}
		}
		if n, ok := Decode(name); ok && Encode(n) != name {
			t.Fatalf("Decode(%q) = %q, which encodes to %q", name, n, Encode(n))
		}
	})
}

func TestPropertyManyNames(t *testing.T) {
	// Every pair of parts from an alphabet rich in "_" and "-": distinct
	// names get distinct wire names in one table, all read back.
	parts := []string{"a", "_", "__", "a_", "_a", "a__b", "-", "a-", "x_y_", "___", "b"}
	tab := NewTable(false)
	seen := map[string]string{}
	for _, ns := range parts {
		for _, ac := range parts {
			name := fmt.Sprintf("%s:%s", ns, ac)
			w := tab.Wire(name)
			if other, dup := seen[w]; dup {
				t.Fatalf("%q and %q share %q", name, other, w)
			}
			seen[w] = name
			if back, _ := tab.Name(w); back != name {
				t.Fatalf("%q -> %q -> %q", name, w, back)
			}
		}
	}
}

// Decode reads exactly the names Pattern accepts.
func TestDecodeAcceptsWhatPatternAccepts(t *testing.T) {
	for _, w := range []string{"", "a", "a__b", "a:b", "a__b:c", "ä__b", "a b__c", "-__-", strings.Repeat("a", 30) + "__" + strings.Repeat("b", 32), strings.Repeat("a", 30) + "__" + strings.Repeat("b", 33), "a__b\n"} {
		if _, ok := Decode(w); ok && !Pattern.MatchString(w) {
			t.Errorf("Decode(%q) read a name Pattern refuses", w)
		}
		if ns, action, cut := strings.Cut(w, Sep); Pattern.MatchString(w) && cut && ns != "" && action != "" && !strings.HasSuffix(ns, "_") {
			if _, ok := Decode(w); !ok {
				t.Errorf("Decode(%q) refused a name Pattern accepts", w)
			}
		}
	}
}
