package toolglob

import (
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/wirename"
)

// FuzzMatch takes a permission pattern and a tool (namespace:action).
// Whatever they are: no panic; a deny "*" and "namespace:*" match the
// tool (a deny that misses fails open); the tool's own name in each form
// a person copies (pml's, the wire name, the client's, upper case)
// matches it exactly; an exact pattern matches; a pattern Check refuses
// matches nothing as a glob; the escaped name "Always" saves (Escape)
// reads back as the tool and matches no other tool.
func FuzzMatch(f *testing.F) {
	for _, s := range [][3]string{
		{"shell:exec", "shell", "exec"}, {"SHELL__EXEC", "shell", "exec"}, {"mcp__pml__filesystem__*", "filesystem", "read_file"},
		{"fs:[rw]*", "fs", "write"}, {"a?b", "a", "b"}, {"*", "srv", "a/b"}, {"srv:*", "srv", "a/b/c"}, {"shell:[", "shell", "["},
		{`x\`, "x", "y"}, {"my_ns__do__it", "my_ns", "do__it"}, {" Shell:Exec\t", "shell", "exec"}, {"*:*", "é", "ß"},
		{`evil:\*`, "evil", "*"}, {`evil:\*`, "evil", "delete_all"}, {`a:\[x\]`, "a", "[x]"}, {`a:\\`, "a", `\`}, {"evil:*", "evil", "*"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, pattern, ns, action string) {
		Normalize(pattern)
		err := Check(pattern)
		if ns == "" || action == "" || strings.Contains(ns, ":") || strings.TrimSpace(ns) != ns || strings.TrimSpace(action) != action ||
			strings.HasPrefix(strings.ToLower(ns), ClientPrefix) {
			// Not a tool name pml has: only no panic.
			Match(pattern, ns+":"+action)
			Exact(pattern, ns+":"+action)
			return
		}
		tool := ns + ":" + action
		// (A refused pattern that is the tool's very name still names
		// it: configuration loading refuses the pattern first.)
		if err != nil && Match(pattern, tool) && !Exact(pattern, tool) {
			t.Fatalf("%q, refused by Check (%v), matches %q", pattern, err, tool)
		}
		if Exact(pattern, tool) && !Match(pattern, tool) {
			t.Fatalf("%q names %q exactly but does not match it", pattern, tool)
		}
		always := []string{"*", "mcp__pml__*"}
		if !strings.ContainsAny(ns, `*?[\`) {
			// (A namespace with glob characters of its own, as "\" in
			// testdata/fuzz/FuzzMatch/ca0591b8f2a2f629, is no server name
			// pml accepts, and ns + ":*" is then another glob.)
			always = append(always, ns+":*")
		}
		for _, p := range always {
			if Check(p) == nil && !Match(p, tool) {
				t.Fatalf("%q does not match %q", p, tool)
			}
		}
		if CoversNamespace(pattern, ns) && !Match(pattern, tool) {
			t.Fatalf("%q covers the namespace %q but does not match %q", pattern, ns, tool)
		}
		forms := []string{Escape(tool), wirename.Encode(tool), ClientPrefix + wirename.Encode(tool)}
		if isASCII(tool) {
			forms = append(forms, strings.ToUpper(Escape(tool)))
		}
		// What "Always" saves (Escape) names the tool and no other: not a
		// tool of the same namespace, not one the name would match as a
		// glob ("*" saved for evil:* must not allow evil:delete_all).
		saved := Escape(tool)
		if l, ok := Literal(saved); !ok || l != tool {
			t.Fatalf("Escape(%q) = %q reads back as %q, %v", tool, saved, l, ok)
		}
		if Check(saved) != nil {
			t.Fatalf("Escape(%q) = %q is refused by Check: %v", tool, saved, Check(saved))
		}
		for _, other := range []string{ns + ":delete_all", ns + ":" + action + "x", ns + "x:" + action, "x" + ns + ":" + action} {
			if strings.EqualFold(other, tool) || wirename.Encode(other) == wirename.Encode(tool) {
				continue
			}
			if Match(saved, other) || Exact(saved, other) {
				t.Fatalf("Escape(%q) = %q matches the other tool %q", tool, saved, other)
			}
		}
		for _, p := range forms {
			if !Exact(p, tool) || !Match(p, tool) {
				t.Fatalf("%q, a form of %q, does not name it (exact %v, match %v)", p, tool, Exact(p, tool), Match(p, tool))
			}
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
