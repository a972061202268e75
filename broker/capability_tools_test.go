package broker

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/registry/serve"
)

// capRegistry serves mathx (a deno module served as code) and smart (a
// deno entry served as metadata with a description and an input schema,
// its code behind codeUrl). stop takes both off the network.
func capRegistry(t *testing.T) (pmlJSON string, stop func()) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("acme.tools.mathx.double.ts", "export function double(n: number) { return 2 * n }\nexport async function half(n: number) { return n / 2 }\n")
	// The code is on the registry's own origin: a codeUrl on another
	// loopback port is refused (registry.codeURL, issue 50).
	write("pml.mcp.smart.server.json", `{"type": "deno", "codeUrl": "/code/smart.ts", "description": "Searches smartly.",
  "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}`)
	h, err := serve.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/code/smart.ts", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/typescript")
		fmt.Fprint(w, "export function search(args: { q: string }) { return args.q }\n")
	})
	mux.Handle("/", h)
	reg := httptest.NewServer(mux)
	var once sync.Once
	stop = func() { once.Do(func() { reg.Close() }) }
	t.Cleanup(stop)
	return fmt.Sprintf(`{"registries": [%q], "permissions": {"allow": ["mathx:*", "smart:*"]}}`, reg.URL), stop
}

func listedTool(b *Broker, name string) (tl.Tool, bool) {
	for _, tl := range b.Tools() {
		if tl.Name == name {
			return tl, true
		}
	}
	return tl.Tool{}, false
}

// TestAddedCapabilitiesAreToolsOffline: what pml add stored is listed by
// a later session as namespace:function tools, with the registry's
// description and input schema, with no registry reachable.
func TestAddedCapabilitiesAreToolsOffline(t *testing.T) {
	cfg, stop := capRegistry(t)
	f := newFixture(t, cfg)
	yes := func(workflow.Approval) bool { return true }
	for _, name := range []string{"acme.tools.mathx.double", "smart"} {
		if _, err := f.b.AddCapability(context.Background(), name, yes); err != nil {
			t.Fatalf("pml add %s: %v", name, err)
		}
	}
	stop()

	g := newFixtureIn(t, f.ws)
	done := make(chan struct{})
	go func() { g.b.LoadServers(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("loading the added capabilities waited on the network")
	}
	for _, name := range []string{"mathx:double", "mathx:half", "smart:search"} {
		if _, ok := listedTool(g.b, name); !ok {
			t.Errorf("%s is not listed", name)
		}
	}
	s, _ := listedTool(g.b, "smart:search")
	if !strings.HasPrefix(s.Description, "Searches smartly.") || !strings.Contains(string(s.InputSchema), `"required"`) {
		t.Errorf("smart:search: the registry's description and schema are not used: %q %s", s.Description, s.InputSchema)
	}
	d, _ := listedTool(g.b, "mathx:double")
	if string(d.InputSchema) != `{"type":"object"}` || !strings.Contains(d.Description, "double (from acme.tools.mathx.double)") {
		t.Errorf("mathx:double: %q %s", d.Description, d.InputSchema)
	}
	// The registry's schema checks the arguments before anything runs.
	if r := g.call(t, "smart:search", map[string]any{"query": "x"}); !r.IsError || !strings.Contains(r.Text, "q") {
		t.Errorf("arguments against the registry's schema: %+v", r)
	}
}

// TestAddedCapabilityWhoseCopyChangedIsNotListed: a cached copy that is
// not the version the lockfile records is not listed.
func TestAddedCapabilityWhoseCopyChangedIsNotListed(t *testing.T) {
	cfg, _ := capRegistry(t)
	f := newFixture(t, cfg)
	if _, err := f.b.AddCapability(context.Background(), "acme.tools.mathx.double", func(workflow.Approval) bool { return true }); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(f.ws, ".pml", "mcp.lock")
	b, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), `"integrity": "sha256-`) + len(`"integrity": "sha256-`)
	bad := string(b[:i]) + "0000" + string(b[i+4:])
	if err := os.WriteFile(lock, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	g := newFixtureIn(t, f.ws)
	g.b.LoadServers(context.Background())
	if _, ok := listedTool(g.b, "mathx:double"); ok {
		t.Fatal("a capability whose cached copy the lockfile does not record is listed")
	}
}

// TestCapabilitiesAddedOrRemovedDuringASession: a pml add or pml remove
// (another process) changes the listing of a running session, and its
// listeners hear it (tools/list_changed).
func TestCapabilitiesAddedOrRemovedDuringASession(t *testing.T) {
	cfg, _ := capRegistry(t)
	f := newFixture(t, cfg)
	g := newFixtureIn(t, f.ws)
	var mu sync.Mutex
	var added, removed []string
	g.b.OnToolsChanged(func(a []tl.Tool, r []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, tl := range a {
			added = append(added, tl.Name)
		}
		removed = append(removed, r...)
	})
	g.b.LoadServers(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := g.b.WatchConfig(ctx, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.AddCapability(context.Background(), "acme.tools.mathx.double", func(workflow.Approval) bool { return true }); err != nil {
		t.Fatal(err)
	}
	seen := func(l *[]string, name string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return strings.Contains(strings.Join(*l, ","), name)
		}
	}
	waitUntil(t, "mathx:double listed", seen(&added, "mathx:double"))
	if _, ok := listedTool(g.b, "mathx:half"); !ok {
		t.Fatal("mathx:half is not listed after pml add")
	}
	if _, ok, err := tl.RemoveCapability(f.ws, "acme.tools.mathx.double", false); !ok || err != nil {
		t.Fatal(ok, err)
	}
	waitUntil(t, "mathx:double unlisted", seen(&removed, "mathx:double"))
	if _, ok := listedTool(g.b, "mathx:half"); ok {
		t.Fatal("mathx:half is still listed after pml remove")
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestADenoEntryFoundByALookupBecomesATool: a call of ns:function that
// nothing local provides finds a deno entry in a registry: its functions
// become tools (it used to answer "runs with pml run"), and a function it
// does not export is named as such.
func TestADenoEntryFoundByALookupBecomesATool(t *testing.T) {
	cfg, _ := capRegistry(t)
	f := newFixture(t, cfg)
	r := f.call(t, "smart:nosuch", nil)
	if !r.IsError || !strings.Contains(r.Text, "exports no function nosuch") {
		t.Fatalf("a function the entry does not export: %+v", r)
	}
	s, ok := listedTool(f.b, "smart:search")
	if !ok || !strings.HasPrefix(s.Description, "Searches smartly.") {
		t.Fatalf("smart:search after the lookup: %v %+v", ok, s)
	}
}
