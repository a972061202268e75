package capname

import (
	"strings"
	"testing"
)

// FuzzParse: whatever is typed, Parse either refuses it or returns a name
// whose registry FQDN is lowercase parts of the safe set (no path
// separator, no "..": it names cache files) and whose .mcp.json key holds
// no dot.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"smartSearch@1.2.0", "db.postgres_query@latest", "casys.pml.myCapability", "x@>=1.0.0 <2.0.0", "a.b.c.d.3f2a", "x@^1.2", "x@~1.2.0", "@", "a..b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		r, err := Parse(arg)
		if err != nil {
			return
		}
		parts := strings.Split(r.FQDN(), ".")
		if len(parts) != 4 && len(parts) != 5 {
			t.Fatalf("Parse(%q).FQDN() = %q: not 4 or 5 parts", arg, r.FQDN())
		}
		for _, p := range parts {
			if p == "" || p != strings.ToLower(p) || strings.ContainsAny(p, "/\\:@ ") || p == ".." {
				t.Fatalf("Parse(%q).FQDN() = %q: part %q", arg, r.FQDN(), p)
			}
		}
		if strings.Contains(r.Key(), ".") || r.Key() == "" {
			t.Fatalf("Parse(%q).Key() = %q", arg, r.Key())
		}
		if r.Kind == Hash && len(r.Hash) != 4 {
			t.Fatalf("Parse(%q): hash %q", arg, r.Hash)
		}
		r.Allows("1.2.3")
		_, _ = r.Pick([]string{"1.0.0", "x"})
	})
}
