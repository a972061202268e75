package tools

import (
	"testing"

	"github.com/pml-dev/pml/internal/capname"
	"github.com/pml-dev/pml/internal/registry"
)

func TestANamedVersionTheLockDoesNotHoldIsFetched(t *testing.T) {
	le := registry.LockEntry{FQDN: "pml.mcp.notes.server.3f2a", Version: "1.2.0"}
	for ref, want := range map[string]bool{
		"notes": true, "notes@latest": true, "notes@1.2.0": true, "notes@^1.0": true, "notes@3f2a": true,
		"notes@2.0.0": false, "notes@~1.3": false, "notes@7b92": false,
	} {
		r, err := capname.Parse(ref)
		if err != nil {
			t.Fatal(err)
		}
		if got := lockedAllows(r, le); got != want {
			t.Errorf("%s against the pinned 1.2.0 (3f2a): %v, want %v", ref, got, want)
		}
	}
}
