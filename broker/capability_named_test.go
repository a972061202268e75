package broker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tl "github.com/pml-dev/pml/broker/tools"
)

// namedPmlJSON is capRegistry's .pml.json with capabilities naming its
// two entries as the seeds write names.
func namedPmlJSON(cfg string) string {
	return strings.TrimSuffix(cfg, "}") + `, "capabilities": ["acme.tools.mathx.double", "smart@latest"]}`
}

// TestNamedCapabilityIsListedFromLockAndCacheOffline: a capability
// .pml.json names, which the lockfile pins and the cache holds, is listed
// as an added one is, with no registry and nothing in
// .pml/capabilities.json.
func TestNamedCapabilityIsListedFromLockAndCacheOffline(t *testing.T) {
	cfg, stop := capRegistry(t)
	f := newFixture(t, namedPmlJSON(cfg))
	for _, fqdn := range []string{"acme.tools.mathx.double", "pml.mcp.smart.server"} {
		if _, _, err := f.b.registry.FetchChecked(context.Background(), fqdn); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if _, err := os.Stat(filepath.Join(f.ws, tl.CapabilitiesFile)); !os.IsNotExist(err) {
		t.Fatalf("%s exists: %v", tl.CapabilitiesFile, err)
	}
	g := newFixtureIn(t, f.ws)
	done := make(chan struct{})
	go func() { g.b.LoadServers(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("listing the named capabilities waited on the network")
	}
	for _, name := range []string{"mathx:double", "mathx:half", "smart:search"} {
		if _, ok := listedTool(g.b, name); !ok {
			t.Errorf("%s is not listed", name)
		}
	}
	if s, _ := listedTool(g.b, "smart:search"); !strings.HasPrefix(s.Description, "Searches smartly.") {
		t.Errorf("smart:search is not described as the registry says: %q", s.Description)
	}
}

// TestNamedCapabilityIsFetchedInTheBackground: a named capability the
// workspace never fetched is not waited for; once the session started it
// is fetched, pinned in .pml/mcp.lock and listed, and the listeners hear it
// (tools/list_changed).
func TestNamedCapabilityIsFetchedInTheBackground(t *testing.T) {
	cfg, _ := capRegistry(t)
	f := newFixture(t, namedPmlJSON(cfg))
	var mu sync.Mutex
	var added []string
	f.b.OnToolsChanged(func(a []tl.Tool, _ []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, tl := range a {
			added = append(added, tl.Name)
		}
	})
	f.b.LoadServers(context.Background())
	if _, ok := listedTool(f.b, "mathx:double"); ok {
		t.Fatal("listed before it was fetched: the listing waited for the registry")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := f.b.WatchConfig(ctx, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "mathx:double and smart:search listed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		s := strings.Join(added, ",")
		return strings.Contains(s, "mathx:double") && strings.Contains(s, "smart:search")
	})
	lock, err := os.ReadFile(filepath.Join(f.ws, ".pml", "mcp.lock"))
	if err != nil || !strings.Contains(string(lock), "acme.tools.mathx.double") || !strings.Contains(string(lock), "pml.mcp.smart.server") {
		t.Fatalf("not pinned in the lockfile: %v\n%s", err, lock)
	}
	if _, err := os.Stat(filepath.Join(f.ws, tl.CapabilitiesFile)); !os.IsNotExist(err) {
		t.Errorf("%s was written: %v", tl.CapabilitiesFile, err)
	}
}

// TestNamedCapabilityAddedByAnEditOfPmlJSON: a running session lists a
// name an edit of .pml.json adds (fetching it), and unlists it when the
// edit takes it out.
func TestNamedCapabilityAddedByAnEditOfPmlJSON(t *testing.T) {
	cfg, _ := capRegistry(t)
	f := newFixture(t, cfg)
	f.b.LoadServers(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := f.b.WatchConfig(ctx, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(f.ws, ".pml.json"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(namedPmlJSON(cfg))
	waitUntil(t, "mathx:double listed after the edit", func() bool { _, ok := listedTool(f.b, "mathx:double"); return ok })
	write(cfg)
	waitUntil(t, "mathx:double unlisted after the edit", func() bool { _, ok := listedTool(f.b, "mathx:double"); return !ok })
}
