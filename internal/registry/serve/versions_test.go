package serve

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/capname"
	"github.com/pml-dev/pml/internal/registry"
)

// A name published in semantic versions (seed 000: pml add
// smartSearch@1.2.0): the catalog lists each version, the 4-part name
// redirects to the highest release, every version is served under its own
// hash with X-PML-Version, and the client resolves npm ranges against the
// listing once, then keeps the locked version.
func TestSemanticVersionsAreListedServedAndResolved(t *testing.T) {
	f := newFixture(t)
	for _, v := range []string{"1.0.0", "1.2.0", "1.3.1", "2.0.0-beta.1"} {
		f.write("pml.mcp.smartsearch.server@"+v+".ts", "export function run() { return '"+v+"'; }\n")
	}
	f.write("pml.mcp.bad.server@one.ts", "x\n")
	srv := httptest.NewServer(f.h)
	defer srv.Close()

	r := f.get("/mcp/pml.mcp.smartsearch.server")
	loc := r.Header.Get("Location")
	cur := f.get(loc)
	if got := body(t, cur); !strings.Contains(got, "1.3.1") || cur.Header.Get("X-PML-Version") != "1.3.1" {
		t.Fatalf("current version: %s %q %q", loc, got, cur.Header.Get("X-PML-Version"))
	}
	cat := jsonBody(t, f.get("/mcp?fqdn=pml.mcp.smartsearch.server"))
	if cat["total"].(float64) != 4 {
		t.Fatalf("catalog of one name: %v", cat)
	}
	if !strings.Contains(f.log.String(), "pml.mcp.bad.server@one.ts") {
		t.Errorf("a file with a bad version was not reported: %s", f.log)
	}

	ws := t.TempDir()
	c, err := registry.New(registry.Options{Registries: []string{srv.URL}, CacheDir: registry.CacheDir(ws)})
	if err != nil {
		t.Fatal(err)
	}
	lock, err := registry.LoadLockfileKeeping(registry.LockfilePath(ws), func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for spec, want := range map[string]string{"@1.2.0": "1.2.0", "@^1.2": "1.3.1", "@~1.2.0": "1.2.0", "@>=1.0.0 <1.3.0": "1.2.0", "@^2.0.0-beta.0": "2.0.0-beta.1"} {
		ref, err := capname.Parse("smartSearch" + spec)
		if err != nil {
			t.Fatal(err)
		}
		fqdn, version, err := registry.Resolve(ctx, c, nil, ref)
		if err != nil || version != want {
			t.Fatalf("%s resolved to %s %s, %v; want %s", spec, fqdn, version, err, want)
		}
		e, err := c.Fetch(ctx, fqdn)
		if err != nil || e.Version != want || !strings.Contains(e.Code, want) {
			t.Fatalf("%s fetched %+v, %v", spec, e, err)
		}
	}
	// Resolved once: the version locked is kept while the range allows it.
	ref, _ := capname.Parse("smartSearch@^1.0")
	fqdn, _, _ := registry.Resolve(ctx, c, nil, ref)
	e, _ := c.Fetch(ctx, fqdn)
	if _, err := lock.Check(e); err != nil {
		t.Fatal(err)
	}
	if le, _ := lock.Get(fqdn); le.Version != "1.3.1" || le.Integrity != e.Integrity {
		t.Fatalf("locked %+v; want version 1.3.1 with the entry's integrity", le)
	}
	f.write("pml.mcp.smartsearch.server@1.4.0.ts", "export function run() { return '1.4.0'; }\n")
	if got, v, err := registry.Resolve(ctx, c, lock, ref); err != nil || got != fqdn || v != "1.3.1" {
		t.Errorf("with 1.3.1 locked, ^1.0 resolved to %s %s, %v: want the locked one", got, v, err)
	}
	if _, v, _ := registry.Resolve(ctx, c, nil, ref); v != "1.4.0" {
		t.Errorf("without a lock, ^1.0 resolved to %s; want 1.4.0", v)
	}
	ref, _ = capname.Parse("smartSearch@^3")
	if _, _, err := registry.Resolve(ctx, c, lock, ref); !errors.Is(err, registry.ErrNotFound) || !strings.Contains(err.Error(), "1.3.1") {
		t.Errorf("^3: %v; want not found, listing the versions", err)
	}
	// Offline, the cached copy keeps its version.
	srv.Close()
	if e, err := c.Fetch(ctx, fqdn); err != nil || !e.FromCache || e.Version == "" {
		t.Errorf("offline: %+v, %v", e, err)
	}
}
