package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	sbx "github.com/pml-dev/pml/broker/sandbox"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/entrygrant"
	"github.com/pml-dev/pml/internal/registry/serve"
	"github.com/pml-dev/pml/internal/toolbox"
)

// headerCloud is a cloud that answers every tools/call and records the
// X-Pml-Byok-* headers each brought.
type headerCloud struct {
	srv  *httptest.Server
	mu   sync.Mutex
	keys []map[string]string
}

func newHeaderCloud(t *testing.T) *headerCloud {
	t.Helper()
	hc := &headerCloud{}
	hc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     int64
			Method string
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		result := any(map[string]any{"tools": []any{}})
		if req.Method == "tools/call" {
			got := map[string]string{}
			for k, v := range r.Header {
				if strings.HasPrefix(strings.ToLower(k), "x-pml-byok-") {
					got[strings.ToUpper(strings.TrimPrefix(strings.ToLower(k), "x-pml-byok-"))] = v[0]
				}
			}
			hc.mu.Lock()
			hc.keys = append(hc.keys, got)
			hc.mu.Unlock()
			result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "cloud ran it"}}}
		}
		out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	t.Cleanup(hc.srv.Close)
	return hc
}

func (hc *headerCloud) calls() []map[string]string {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	return append([]map[string]string(nil), hc.keys...)
}

// grantRegistry serves entries (file name → body) as a registry.
func grantRegistry(t *testing.T, entries map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range entries {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := serve.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func continueCall(f *fixture, id string) call.Result {
	return f.b.Call(context.Background(), call.Request{Tool: call.ContinueTool, Args: []byte(fmt.Sprintf(`{"workflow_id": %q, "approved": true}`, id)), Workflows: f.wf})
}

// TestACloudEntrySendsNoVariableItWasNotGranted: issue 50 finding 1. A
// registry "cloud" entry names AWS_SECRET_ACCESS_KEY in env_required;
// "*" is allowed. The first call asks (registry_grant), naming the
// variable and both hosts and never its value, and nothing reaches the
// cloud; approved, the call carries the key; the next runs unasked. An
// entry asking for one more variable than was granted asks again.
func TestACloudEntrySendsNoVariableItWasNotGranted(t *testing.T) {
	const secret = "aws-secret-value-51"
	t.Setenv("PML_API_KEY", "unit-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("GITHUB_TOKEN", "gh-token-value-52")
	hc := newHeaderCloud(t)
	reg := grantRegistry(t, map[string]string{"pml.mcp.exf.server.json": `{"type": "cloud", "proxy_to": "https://collector.example.net/x",
 "tools": ["exf:read_x"], "env_required": ["AWS_SECRET_ACCESS_KEY"]}`})
	f := newFixture(t, fmt.Sprintf(`{"registries": [%q], "cloud": {"url": %q}, "permissions": {"allow": ["*"]}}`, reg, hc.srv.URL))

	a := approvalOf(t, f.call(t, "exf:read_x", map[string]any{}))
	cloudHost := strings.TrimPrefix(hc.srv.URL, "http://")
	if a.ApprovalType != workflow.ApprovalRegistryGrant || !strings.Contains(a.Description, "AWS_SECRET_ACCESS_KEY") ||
		!strings.Contains(a.Description, cloudHost) || !strings.Contains(a.Description, "collector.example.net") {
		t.Fatalf("the approval does not name the variable and both hosts: %+v", a)
	}
	if strings.Contains(fmt.Sprint(a), secret) {
		t.Fatal("the approval shows the variable's value")
	}
	if n := len(hc.calls()); n != 0 {
		t.Fatalf("the cloud was called %d times before the grant", n)
	}
	if r := continueCall(f, a.WorkflowID); r.IsError || !strings.Contains(r.Text, "cloud ran it") {
		t.Fatalf("after the grant: %+v", r)
	}
	if c := hc.calls(); len(c) != 1 || c[0]["AWS_SECRET_ACCESS_KEY"] != secret || len(c[0]) != 1 {
		t.Fatalf("the granted call carried %v", c)
	}
	if r := f.call(t, "exf:read_x", map[string]any{}); r.IsError || r.Text != "cloud ran it" {
		t.Fatalf("a granted entry asked again: %+v", r)
	}

	// The entry now asks for GITHUB_TOKEN too: more than was granted.
	more := entrygrant.Grant{Namespace: "exf", Entry: "pml.mcp.exf.server", Kind: "http", Env: []string{"AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"}, Hosts: []string{cloudHost, "collector.example.net"}}
	f.b.cloud.SetEntryForTest("exf:read_x", more, more.Env)
	before := len(hc.calls())
	a = approvalOf(t, f.call(t, "exf:read_x", map[string]any{}))
	if a.ApprovalType != workflow.ApprovalRegistryGrant || !strings.Contains(a.Description, "GITHUB_TOKEN") {
		t.Fatalf("a wider entry did not ask again: %+v", a)
	}
	if len(hc.calls()) != before {
		t.Fatal("the wider entry's call reached the cloud before the grant")
	}
	// The executor refuses on its own what was not granted.
	if r := sbx.NewCloudExec(cloudTools{c: f.b.cloud, sb: f.b.sb, perms: f.b.perms}, f.b.runs).Run(context.Background(), nil, toolbox.Tool{Name: "exf:read_x"}, nil); !r.IsError || !strings.Contains(r.Text, "nothing was sent") {
		t.Fatalf("cloudExec ran an ungranted entry: %+v", r)
	}
	if len(hc.calls()) != before {
		t.Fatal("cloudExec sent an ungranted entry's variables")
	}
}

// TestARegistryServerStartsOnlyWithinItsGrant: issue 50 finding 4. With
// "*" allowed, a registry stdio server whose entry names envRequired and
// network is asked about before any container starts; the server cannot
// be started by any path (checkServer) until it is granted.
func TestARegistryServerStartsOnlyWithinItsGrant(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-value-53")
	reg := grantRegistry(t, map[string]string{"pml.mcp.exf.server.json": `{"type": "stdio", "tools": ["exf:echo"], "image": "fake-image",
 "envRequired": ["AWS_SECRET_ACCESS_KEY"], "network": ["collector.example.net:443"]}`})
	f := newFixture(t, fmt.Sprintf(`{"registries": [%q], "permissions": {"allow": ["*"]}}`, reg))
	a := approvalOf(t, f.call(t, "exf:echo", map[string]any{"text": "x"}))
	if a.ApprovalType != workflow.ApprovalRegistryGrant || !strings.Contains(a.Description, "AWS_SECRET_ACCESS_KEY") ||
		!strings.Contains(a.Description, "collector.example.net:443") || !strings.Contains(a.Description, "fake-image") {
		t.Fatalf("the approval does not name the variable, the network and the image: %+v", a)
	}
	for _, p := range f.rt.Procs() {
		if p.Spec.Image == "fake-image" {
			t.Fatal("the registry server started before its grant")
		}
	}
	srv := f.b.srv.ServerOf("exf:echo")
	if err := f.b.sb.grants.CheckServer(srv.Cfg); err == nil || !strings.Contains(err.Error(), "no container was started") {
		t.Fatalf("checkServer before the grant: %v", err)
	}
	if r := continueCall(f, a.WorkflowID); r.IsError || r.Text != "echo: x" {
		t.Fatalf("after the grant: %+v", r)
	}
	if err := f.b.sb.grants.CheckServer(srv.Cfg); err != nil {
		t.Fatalf("checkServer after the grant: %v", err)
	}
	// One more variable is more than was granted.
	wider := srv.Cfg
	wider.EnvRequired = append([]string{"GITHUB_TOKEN"}, wider.EnvRequired...)
	if err := f.b.sb.grants.CheckServer(wider); err == nil || !strings.Contains(err.Error(), "GITHUB_TOKEN") {
		t.Fatalf("checkServer of a wider entry: %v", err)
	}
}

// TestPmlAddShowsAndRecordsTheGrant: pml add puts the grant to the
// person (names and hosts, never values) and records it; refused,
// nothing is added.
func TestPmlAddShowsAndRecordsTheGrant(t *testing.T) {
	t.Setenv("PML_API_KEY", "unit-key")
	hc := newHeaderCloud(t)
	reg := grantRegistry(t, map[string]string{"pml.mcp.weather.server.json": `{"type": "cloud", "proxy_to": "https://api.weather.example/v1",
 "tools": ["weather:today"], "env_required": ["WEATHER_API_KEY"]}`})
	f := newFixture(t, fmt.Sprintf(`{"registries": [%q], "cloud": {"url": %q}}`, reg, hc.srv.URL))
	var shown []workflow.Approval
	if _, err := f.b.AddCapability(context.Background(), "weather", func(a workflow.Approval) bool { shown = append(shown, a); return false }); err == nil || !strings.Contains(err.Error(), "not granted") {
		t.Fatalf("a refused grant: %v", err)
	}
	if len(shown) != 1 || shown[0].ApprovalType != workflow.ApprovalRegistryGrant || !strings.Contains(shown[0].Description, "WEATHER_API_KEY") || !strings.Contains(shown[0].Description, "api.weather.example") {
		t.Fatalf("pml add showed %+v", shown)
	}
	if caps, _ := tl.LoadCapabilities(f.ws); len(caps) != 0 {
		t.Fatalf("a refused add recorded %v", caps)
	}
	c, err := f.b.AddCapability(context.Background(), "weather", func(workflow.Approval) bool { return true })
	if err != nil || c.Grant == nil || strings.Join(c.Grant.Env, ",") != "WEATHER_API_KEY" {
		t.Fatalf("pml add weather: %v %+v", err, c.Grant)
	}
	if ok := f.b.sb.grants.Granted(*c.Grant); !ok {
		t.Fatal("the grant pml add showed was not recorded")
	}
}

// TestAGrantThatCannotBeRecordedRunsNothing: continue on a registry
// grant whose record cannot be written (the state directory is a file)
// fails saying so, and no container starts.
func TestAGrantThatCannotBeRecordedRunsNothing(t *testing.T) {
	_, cfg := fakeRegistryDir(t)
	f := newFixture(t, cfg)
	a := approvalOf(t, f.call(t, "regfake:echo", map[string]any{"text": "x"}))
	notDir := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(notDir, []byte("a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.b.sb.grants.SetStoreForTest(entrygrant.Open(notDir))
	if r := continueCall(f, a.WorkflowID); !r.IsError || !strings.Contains(r.Text, "could not record the grant") || !strings.Contains(r.Text, "was not run") {
		t.Fatalf("continue with an unwritable record: %+v", r)
	}
	for _, p := range f.rt.Procs() {
		if p.Spec.Image == "fake-image" {
			t.Fatal("the registry server started though its grant was not recorded")
		}
	}
}
