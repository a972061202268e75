package broker

import (
	"context"
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
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/registry/serve"
)

const regfakeMeta = `{"type": "stdio", "description": "a fake server%s", "tools": ["regfake:echo", "regfake:boom"], "image": "fake-image"}`

// fakeRegistryDir serves a registry directory holding regfake (a stdio
// server on the fake runtime) and a deno module; it returns the
// directory and the .pml.json that uses it.
func fakeRegistryDir(t *testing.T) (dir, pmlJSON string) {
	t.Helper()
	dir = t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pml.mcp.regfake.server.json", fmt.Sprintf(regfakeMeta, ""))
	write("acme.tools.mathx.double.ts", "export function double(n: number) { return 2 * n }\nexport async function half(n: number) { return n / 2 }\n")
	h, err := serve.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return dir, fmt.Sprintf(`{"registries": [%q], "permissions": {"allow": ["regfake:*", "mathx:*"], "deny": ["denied:*"]}}`, srv.URL)
}

func TestARegistryToolIsFetchedLockedAndRun(t *testing.T) {
	dir, cfg := fakeRegistryDir(t)
	f := newFixture(t, cfg)
	// The entry chose its image: a grant of its own, asked though
	// regfake:* is allowed (registry_grant.go), then the call runs.
	ga := approvalOf(t, f.call(t, "regfake:echo", map[string]any{"text": "reg"}))
	if ga.ApprovalType != workflow.ApprovalRegistryGrant || ga.Context["grant_image"] != "fake-image" || !strings.Contains(ga.Description, "fake-image") {
		t.Fatalf("registry grant approval: %+v", ga)
	}
	if r := f.b.Call(context.Background(), call.Request{Tool: call.ContinueTool, Args: []byte(fmt.Sprintf(`{"workflow_id": %q, "approved": true}`, ga.WorkflowID)), Workflows: f.wf}); r.IsError || r.Text != "echo: reg" {
		t.Fatalf("regfake:echo after the grant: %+v", r)
	}
	if r := f.call(t, "regfake:echo", map[string]any{"text": "reg"}); r.IsError || r.Text != "echo: reg" {
		t.Fatalf("regfake:echo, granted: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(f.ws, ".pml", "mcp.lock")); err != nil {
		t.Fatalf("no lockfile: %v", err)
	}
	if r := f.call(t, "nothere:tool", nil); !r.IsError {
		t.Fatalf("a namespace no registry has: %+v", r)
	}
	if r := f.call(t, "denied:tool", nil); !r.IsError || !strings.Contains(r.Text, "deny") {
		t.Fatalf("a denied registry name: %+v", r)
	}

	// The entry changes: the next session asks before trusting it.
	if err := os.WriteFile(filepath.Join(dir, "pml.mcp.regfake.server.json"), []byte(fmt.Sprintf(regfakeMeta, ", changed")), 0o644); err != nil {
		t.Fatal(err)
	}
	g := newFixtureIn(t, f.ws)
	// The person's record of grants outlives a session (here: the
	// fixture's in-memory one, shared).
	g.b.sb.grants.SetStoreForTest(f.b.sb.grants.StoreForTest())
	before := len(auditEntries(t, g.ws))
	a := approvalOf(t, g.call(t, "regfake:echo", map[string]any{"text": "again"}))
	if a.ApprovalType != workflow.ApprovalIntegrity || a.Context["fqdn"] == nil {
		t.Fatalf("integrity approval: %+v", a)
	}
	if e := auditEntries(t, g.ws)[before:]; len(e) != 1 || e[0].Decision != audit.Asked || e[0].Reason != "integrity changed" {
		t.Fatalf("audit of the integrity question: %+v", e)
	}
	before = len(auditEntries(t, g.ws))
	r := g.b.Call(context.Background(), call.Request{Tool: call.ContinueTool, Args: []byte(fmt.Sprintf(`{"workflow_id": %q, "approved": true}`, a.WorkflowID)), Workflows: g.wf})
	if r.IsError || r.Text != "echo: again" {
		t.Fatalf("after the integrity approval: %+v", r)
	}
	entries := auditEntries(t, g.ws)[before:]
	if len(entries) != 1 || entries[0].Decision != audit.Allowed || entries[0].Reason != "integrity change approved" {
		t.Fatalf("audit of the approved integrity change: %+v", entries)
	}
}

func TestAddCapability(t *testing.T) {
	_, cfg := fakeRegistryDir(t)
	f := newFixture(t, cfg)
	yes := func(workflow.Approval) bool { return true }
	c, err := f.b.AddCapability(context.Background(), "regfake", yes)
	if err != nil || c.Namespace != "regfake" || len(c.Tools) != 2 {
		t.Fatalf("regfake: %+v %v", c, err)
	}
	c, err = f.b.AddCapability(context.Background(), "acme.tools.mathx.double", yes)
	if err != nil || strings.Join(c.Tools, ",") != "double,half" {
		t.Fatalf("deno module: %+v %v", c, err)
	}
	caps, err := tl.LoadCapabilities(f.ws)
	if err != nil || len(caps) != 2 {
		t.Fatalf("capabilities: %v %v", caps, err)
	}
	if _, removed, err := tl.RemoveCapability(f.ws, "regfake", true); !removed || err != nil {
		t.Fatalf("remove: %v %v", removed, err)
	}
	for _, bad := range []string{"Bad Name", "x@", "filesystem", "regfake@zz"} {
		if _, err := f.b.AddCapability(context.Background(), bad, yes); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
