package capname

import (
	"errors"
	"strings"
	"testing"
)

// The names of the seeds' own commands (seed 000: pml add
// db.postgres_query[@latest|@1.2.0], pml add smartSearch, the FQDN
// casys.pml.myCapability) and npm's ranges.
func TestParseSeedNames(t *testing.T) {
	for _, c := range []struct {
		arg, fqdn, name, key, version string
		kind                          Kind
	}{
		{"smartSearch", "pml.mcp.smartsearch.server", "smartSearch", "smartSearch", "", Current},
		{"smartSearch@1.2.0", "pml.mcp.smartsearch.server", "smartSearch", "smartSearch", "1.2.0", Exact},
		{"memory", "pml.mcp.memory.server", "memory", "memory", "", Current},
		{"db.postgres_query", "pml.mcp.db.postgres_query", "db.postgres_query", "db_postgres_query", "", Current},
		{"db.postgres_query@latest", "pml.mcp.db.postgres_query", "db.postgres_query", "db_postgres_query", "latest", Current},
		{"db.postgres_query@1.2.0", "pml.mcp.db.postgres_query", "db.postgres_query", "db_postgres_query", "1.2.0", Exact},
		{"casys.pml.myCapability", "casys.pml.mycapability.server", "casys.pml.myCapability", "casys_pml_myCapability", "", Current},
		{"casys.pml.smartSearch@^1.2", "casys.pml.smartsearch.server", "casys.pml.smartSearch", "casys_pml_smartSearch", "^1.2", Range},
		{"acme.tools.json.parse", "acme.tools.json.parse", "acme.tools.json.parse", "acme_tools_json_parse", "", Current},
		{"acme.tools.json.parse@3f2a", "acme.tools.json.parse.3f2a", "acme.tools.json.parse", "acme_tools_json_parse", "3f2a", Hash},
		{"acme.tools.json.parse.3f2a", "acme.tools.json.parse.3f2a", "acme.tools.json.parse.3f2a", "acme_tools_json_parse_3f2a", "", Hash},
		{"x@~1.2.0", "pml.mcp.x.server", "x", "x", "~1.2.0", Range},
		{"x@>=1.0.0 <2.0.0", "pml.mcp.x.server", "x", "x", ">=1.0.0 <2.0.0", Range},
		{"x@1.x", "pml.mcp.x.server", "x", "x", "1.x", Range},
		{"x@=1.2.0", "pml.mcp.x.server", "x", "x", "=1.2.0", Exact},
	} {
		r, err := Parse(c.arg)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.arg, err)
			continue
		}
		if r.FQDN() != c.fqdn || r.Name != c.name || r.Key() != c.key || r.Version != c.version || r.Kind != c.kind {
			t.Errorf("Parse(%q) = fqdn %q name %q key %q version %q kind %d; want %q %q %q %q %d",
				c.arg, r.FQDN(), r.Name, r.Key(), r.Version, r.Kind, c.fqdn, c.name, c.key, c.version, c.kind)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for arg, want := range map[string]string{
		"":                      "no name",
		"x@":                    "nothing after @",
		"@scope/pkg":            "no name",
		"a/b":                   "the part",
		"../etc":                "the part",
		"a..b":                  `the part ""`,
		"a.b.c.d.e.f":           "6 dot-separated parts",
		"a.b.c.d.zzzz":          "not a version hash",
		"a.b.c.d.3f2a@1.0.0":    "two versions",
		"x@not a version":       "not a version",
		"-x":                    "the part",
		"x@1.2.0\n":             "",
		strings.Repeat("a", 64): "the part",
	} {
		r, err := Parse(arg)
		if want == "" {
			// Surrounding space in a version is npm's too: accepted.
			if err != nil {
				t.Errorf("Parse(%q): %v", arg, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %+v, %v; want an error saying %q", arg, r, err, want)
		}
	}
}

func TestPick(t *testing.T) {
	listed := []string{"1.0.0", "1.2.0", "1.2.7", "1.3.0", "2.0.0", "2.1.0-beta.1", "junk"}
	for v, want := range map[string]string{
		"^1.2":           "1.3.0",
		"~1.2.0":         "1.2.7",
		">=1.0.0 <2.0.0": "1.3.0",
		"1.2.0":          "1.2.0",
		"1.x":            "1.3.0",
		">=2":            "2.0.0", // a prerelease only when the range names one
		"^2.1.0-beta.0":  "2.1.0-beta.1",
	} {
		r, err := Parse("x@" + v)
		if err != nil {
			t.Fatal(err)
		}
		i, err := r.Pick(listed)
		if err != nil || listed[i] != want {
			t.Errorf("x@%s picks %v (%v); want %s", v, i, err, want)
		}
	}
	r, _ := Parse("x@^3")
	if _, err := r.Pick(listed); !errors.Is(err, ErrNoMatch) || !strings.Contains(err.Error(), "1.2.7") {
		t.Errorf("x@^3: %v; want ErrNoMatch listing the versions", err)
	}
}
