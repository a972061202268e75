package registry

import (
	"reflect"
	"strings"
	"testing"
)

// A capability's declared tools are read as the seeds write them
// (tools_used, client_tools) and in pml's camelCase, merged, each once.
func TestMetadataReadsTheDeclaredTools(t *testing.T) {
	f := mustFQDN(t, "casys.pml.smartsearch.server")
	m, err := ParseMetadata(f, []byte(`{"type": "deno", "codeUrl": "/code.ts",
  "tools_used": ["filesystem:read_file", "tavily:search"], "client_tools": ["filesystem:read_file"],
  "toolsUsed": ["shell:exec"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Declared(), []string{"shell:exec", "filesystem:read_file", "tavily:search"}; !reflect.DeepEqual(got, want) {
		t.Errorf("declared %v, want %v", got, want)
	}
	var none *Metadata
	if none.Declared() != nil {
		t.Error("no metadata declares nothing")
	}
}

// A declaration names tools, never patterns: "*" would make one approval
// cover every tool.
func TestMetadataRefusesDeclaredPatterns(t *testing.T) {
	f := mustFQDN(t, "casys.pml.smartsearch.server")
	for _, bad := range []string{`"*"`, `"filesystem:*"`, `"read_file"`, `""`, `"a:b\u001b[31m"`} {
		_, err := ParseMetadata(f, []byte(`{"type": "deno", "codeUrl": "/code.ts", "tools_used": [`+bad+`]}`))
		if err == nil || !strings.Contains(err.Error(), "never patterns") {
			t.Errorf("tools_used [%s]: %v", bad, err)
		}
	}
	many := strings.Repeat(`"a:b",`, 10) + `"x:y"`
	if _, err := ParseMetadata(f, []byte(`{"type": "deno", "codeUrl": "/code.ts", "client_tools": [`+many+`]}`)); err != nil {
		t.Errorf("repeated names are one: %v", err)
	}
}
