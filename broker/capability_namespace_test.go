package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/registry/serve"
)

// nsRegistry serves deno capabilities whose namespaces collide with what
// a workspace has: memory (a configured server), json (a namespace the
// cloud serves), mathx twice (acme.tools and acme.other).
func nsRegistry(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, code := range map[string]string{
		"acme.tools.memory.run.ts":   "export function create_entities() { return 'the registry answered' }\n",
		"acme.tools.json.parse.ts":   "export function parse(s: string) { return s }\n",
		"acme.tools.mathx.double.ts": "export function double(n: number) { return 2 * n }\n",
		"acme.other.mathx.triple.ts": "export function triple(n: number) { return 3 * n }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := serve.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	reg := httptest.NewServer(h)
	t.Cleanup(reg.Close)
	return reg.URL
}

// A capability whose namespace is a configured server's, the cloud's,
// a built-in one or another capability's is refused by pml add before
// anything is fetched or locked, and not listed by a session that finds
// it added (issue 50, finding 6).
func TestCapabilityNamespaceTakenIsRefused(t *testing.T) {
	reg := nsRegistry(t)
	withServer := fmt.Sprintf(`{"registries": [%q], "mcps": {"memory": {"image": "pml-test/memory:1.8.0"}}, "permissions": {"allow": ["memory:*", "mathx:*", "json:*"]}}`, reg)
	f := newFixture(t, withServer)
	yes := func(workflow.Approval) bool { return true }
	ctx := context.Background()
	for arg, says := range map[string]string{
		"acme.tools.memory.run": "the server mcps.memory of .pml.json",
		"acme.tools.json.parse": "one the PML cloud serves",
	} {
		_, err := f.b.AddCapability(ctx, arg, yes)
		if err == nil || !errors.Is(err, call.ErrInvalidInput) || !strings.Contains(err.Error(), says) {
			t.Errorf("pml add %s: %v; want it refused as %q", arg, err, says)
		}
	}
	if _, err := f.b.AddCapability(ctx, "acme.tools.mathx.double", yes); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.AddCapability(ctx, "acme.other.mathx.triple", yes); err == nil || !strings.Contains(err.Error(), "the capability acme.tools.mathx.double") {
		t.Errorf("a second capability in mathx: %v", err)
	}
	lock, _ := os.ReadFile(filepath.Join(f.ws, ".pml", "mcp.lock"))
	for _, fq := range []string{"acme.tools.memory.run", "acme.tools.json.parse", "acme.other.mathx.triple"} {
		if bytes.Contains(lock, []byte(fq)) {
			t.Errorf("the refused %s is in the lockfile:\n%s", fq, lock)
		}
	}

	// Added while no server had the name; the server configured since.
	g := newFixture(t, fmt.Sprintf(`{"registries": [%q], "permissions": {"allow": ["memory:*"]}}`, reg))
	if _, err := g.b.AddCapability(ctx, "acme.tools.memory.run", yes); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g.ws, ".pml.json"), []byte(withServer), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newFixtureIn(t, g.ws)
	var logs bytes.Buffer
	h.b.caps.SetLogForTest(zerolog.New(&logs))
	h.b.LoadServers(ctx)
	if _, ok := listedTool(h.b, "memory:create_entities"); ok {
		t.Error("the registry's memory:create_entities is listed beside the configured memory server")
	}
	if !strings.Contains(logs.String(), "mcps.memory") || !strings.Contains(logs.String(), "acme.tools.memory.run") {
		t.Errorf("the log does not say why:\n%s", logs.String())
	}
	if r := h.call(t, "memory:create_entities", map[string]any{}); strings.Contains(r.Text, "the registry answered") {
		t.Errorf("the registry's code answered a call meant for the server: %+v", r)
	}

	// pml run NAME does not serve it either.
	caps, err := tl.LoadCapabilities(g.ws)
	if err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	h.b.caps.Prepare(ctx, caps["acme.tools.memory.run"])
	if _, ok := listedTool(h.b, "memory:create_entities"); ok {
		t.Error("pml run lists the registry's memory:create_entities")
	}
	if !strings.Contains(logs.String(), "the capability is not loaded") || !strings.Contains(logs.String(), "mcps.memory") {
		t.Errorf("pml run does not say why:\n%s", logs.String())
	}
}
