package tools

import (
	"errors"
	"strings"
	"testing"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/registry"
)

// A capability may not take a namespace that is pml's, a server's of
// .pml.json, the cloud's or another capability's (the same entry under
// another spelling is no other).
func TestANamespaceTakenIsRefused(t *testing.T) {
	s := newSources(t, &config.Config{Servers: map[string]config.Server{"Memory": {Name: "Memory"}}}, nil)
	s.cloud.Router().AddServer("tavily")
	others := map[string]Capability{
		"notes":                     {Name: "notes", Namespace: "notes", FQDN: "acme.tools.notes.run.abcd"},
		"acme.tools.notes.run.abcd": {Name: "acme.tools.notes.run.abcd", Namespace: "notes", FQDN: "acme.tools.notes.run.abcd"},
	}
	for ns, want := range map[string]string{
		"Shell":  "pml's built-in shell",
		"memory": "the server mcps.Memory of .pml.json",
		"tavily": "one the PML cloud serves",
		"free":   "",
	} {
		err := s.caps.namespaceTaken("cap", ns, "acme.tools."+ns+".run.abcd", nil)
		switch {
		case want == "" && err != nil, want != "" && (err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, call.ErrInvalidInput)):
			t.Errorf("%s: %v, want %q", ns, err, want)
		}
	}
	if err := s.caps.namespaceTaken("other", "notes", "acme.tools.other.run.abcd", others); err == nil || !strings.Contains(err.Error(), "also the namespace of the capability") {
		t.Errorf("another capability's namespace: %v", err)
	}
	if err := s.caps.namespaceTaken("notes", "notes", "acme.tools.notes.run.abcd", others); err != nil {
		t.Errorf("the same entry under other names: %v", err)
	}
}

// A deno capability whose mcp_deps are not all servers here is listed,
// but its tools answer what is missing, and run nothing.
func TestACapabilityMissingItsDependenciesRunsNothing(t *testing.T) {
	s := newSources(t, nil, nil)
	e := &registry.Entry{FQDN: "acme.tools.cap.main.abcd", Type: registry.TypeDeno, Code: "export function main() {}",
		Meta: &registry.Metadata{Type: registry.TypeDeno, McpDeps: []registry.McpDep{{Name: "memory"}}}}
	s.caps.ListEntry(e, "cap")
	r := s.run(t, "cap:main")
	if !r.IsError || !strings.Contains(r.Text, "memory") {
		t.Errorf("a capability without its server: %+v", r)
	}
	with := newSources(t, &config.Config{Servers: map[string]config.Server{"memory": {Name: "memory"}}}, nil)
	with.caps.ListEntry(e, "cap")
	if r := with.run(t, "cap:main"); r.IsError || r.Text != "deno ran cap:main" {
		t.Errorf("with its server: %+v", r)
	}
}

// pml add refuses a name of a built-in namespace before anything is
// fetched; other names parse into their FQDN.
func TestCapabilityFQDN(t *testing.T) {
	if _, _, err := CapabilityFQDN("acme.tools.filesystem.read"); err == nil || !strings.Contains(err.Error(), "built-in namespace") {
		t.Errorf("a built-in namespace: %v", err)
	}
	ref, f, err := CapabilityFQDN("smartSearch@1.2.0")
	if err != nil || ref.Name != "smartSearch" || f.Namespace != "smartsearch" && f.Namespace != "smartSearch" {
		t.Errorf("%+v %+v %v", ref, f, err)
	}
}
