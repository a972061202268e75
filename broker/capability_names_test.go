package broker

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/registry"
)

// The seeds' own commands (seed 000): pml add smartSearch@1.2.0,
// db.postgres_query@latest, casys.pml.myCapability, and an npm range,
// resolved against the registry's listing and locked with the version.
func TestAddCapabilityWithTheSeedsNames(t *testing.T) {
	dir, cfg := fakeRegistryDir(t)
	for name, code := range map[string]string{
		"pml.mcp.smartsearch.server@1.2.0.ts": "export function run() { return 'v1.2.0' }\n",
		"pml.mcp.smartsearch.server@1.3.0.ts": "export function run() { return 'v1.3.0' }\n",
		"pml.mcp.db.postgres_query.ts":        "export function query() { return 1 }\n",
		"casys.pml.mycapability.server.ts":    "export function go() { return 1 }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixture(t, cfg)
	yes := func(workflow.Approval) bool { return true }
	ctx := context.Background()
	for _, c := range []struct{ arg, name, fqdnBase, version string }{
		{"smartSearch@1.2.0", "smartSearch", "pml.mcp.smartsearch.server", "1.2.0"},
		{"db.postgres_query@latest", "db.postgres_query", "pml.mcp.db.postgres_query", ""},
		{"casys.pml.myCapability", "casys.pml.myCapability", "casys.pml.mycapability.server", ""},
	} {
		got, err := f.b.AddCapability(ctx, c.arg, yes)
		if err != nil {
			t.Fatalf("pml add %s: %v", c.arg, err)
		}
		fq, _ := registry.ParseFQDN(got.FQDN)
		if got.Name != c.name || fq.Base() != c.fqdnBase || got.Version != c.version {
			t.Errorf("pml add %s = %+v; want name %s, %s, version %q", c.arg, got, c.name, c.fqdnBase, c.version)
		}
	}
	lock, err := registry.LoadLockfileKeeping(registry.LockfilePath(f.ws), func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if le, ok := lock.Get("pml.mcp.smartsearch.server"); !ok || le.Version != "1.2.0" || le.Integrity == "" {
		t.Fatalf("lockfile: %+v; want 1.2.0 with its integrity", le)
	}
	// ^1.2 allows the locked 1.2.0: resolved once, not moved to 1.3.0.
	got, err := f.b.AddCapability(ctx, "smartSearch@^1.2", yes)
	if err != nil || got.Version != "1.2.0" {
		t.Fatalf("smartSearch@^1.2 with 1.2.0 locked: %+v %v", got, err)
	}
	caps, err := tl.LoadCapabilities(f.ws)
	if err != nil || caps["smartSearch"].Version != "1.2.0" || caps["db.postgres_query"].FQDN == "" {
		t.Fatalf("capabilities: %+v %v", caps, err)
	}
	if _, err := f.b.AddCapability(ctx, "smartSearch@^2", yes); err == nil {
		t.Error("smartSearch@^2 was accepted with no 2.x listed")
	}
}
