package tools

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/routing"
)

func names(l []Tool) []string {
	var out []string
	for _, t := range l {
		out = append(out, t.Name)
	}
	return out
}

// The configured servers are created in name order, not started, and
// their namespaces run here whatever the cloud routes.
func TestConfiguredServersAreCreatedInOrderAndRouteHere(t *testing.T) {
	s := newSources(t, &config.Config{Servers: map[string]config.Server{
		"zeta": {Name: "zeta", Image: "z"}, "alpha": {Name: "alpha", Image: "a"},
	}}, nil)
	var got []string
	for _, srv := range s.servers.List() {
		got = append(got, srv.Cfg.Name)
	}
	if !slices.Equal(got, []string{"alpha", "zeta"}) {
		t.Errorf("servers %v", got)
	}
	if srv := s.servers.ServerOf("alpha:anything"); srv == nil || srv.Cfg.Image != "a" {
		t.Errorf("alpha:anything belongs to %+v", srv)
	}
	if s.servers.ServerOf("alpha") != nil || s.servers.ServerOf("beta:x") != nil {
		t.Error("a name without namespace, or of no server, has a server")
	}
	if r := s.cloud.Router().Route("zeta:x"); r == routing.Server {
		t.Error("a configured server's tool routes to the cloud")
	}
}

// A server of the same name as a configured one is not added: the local
// configuration wins; a new one joins, and its namespace routes here.
func TestAddKeepsTheConfiguredServer(t *testing.T) {
	s := newSources(t, &config.Config{Servers: map[string]config.Server{"memory": {Name: "memory", Image: "mine"}}}, nil)
	if srv := s.servers.Add(config.Server{Name: "memory", Image: "registry's", FromRegistry: true}); srv.Cfg.Image != "mine" {
		t.Errorf("the registry's memory replaced the configured one: %+v", srv.Cfg)
	}
	s.cloud.Router().AddServer("late")
	s.servers.Add(config.Server{Name: "late", Image: "l"})
	if len(s.servers.List()) != 2 || s.cloud.Router().Route("late:x") == routing.Server {
		t.Errorf("a server added at run time: %d servers, routes %v", len(s.servers.List()), s.cloud.Router().Route("late:x"))
	}
	if _, err := s.servers.InstallNewServer(context.Background(), config.Server{Name: "memory"}); err == nil || !strings.Contains(err.Error(), "already a server here") {
		t.Errorf("pml add of a configured name: %v", err)
	}
}

// A server's tools are registered under its name with the executor its
// lifetime asks for; a name outside MCP's rule is left out, logged once
// (quoted), and the rest listed; the listing ends with
// pml:continue_workflow.
func TestRegisterToolsListsTheServersToolsUnderItsName(t *testing.T) {
	s := newSources(t, &config.Config{Servers: map[string]config.Server{
		"pool": {Name: "pool"}, "each": {Name: "each", Lifetime: "per_call"},
	}}, nil)
	tools := []*mcp.Tool{
		{Name: "read", Description: "reads", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"p": map[string]any{"type": "string"}}}},
		{Name: "titled", Title: "Only a title"},
		{Name: "bad name*"},
		nil,
	}
	s.servers.RegisterTools(s.servers.ServerOf("pool:"), tools)
	s.servers.RegisterTools(s.servers.ServerOf("pool:"), tools) // a list_changed with the same list
	s.servers.RegisterTools(s.servers.ServerOf("each:"), tools[:1])
	got := names(s.servers.Tools())
	if !slices.Equal(got, []string{"pool:read", "pool:titled", "each:read", call.ContinueTool}) {
		t.Fatalf("tools %v", got)
	}
	if r := s.run(t, "pool:read"); r.Text != "pooled pool ran pool:read" {
		t.Errorf("pool:read: %q", r.Text)
	}
	if r := s.run(t, "each:read"); r.Text != "per call each ran each:read" {
		t.Errorf("each:read: %q", r.Text)
	}
	e, _ := s.servers.Table.Get("pool:titled")
	if e.Def.Description != "Only a title" || string(e.Def.InputSchema) != `{"type":"object"}` {
		t.Errorf("a tool with a title only: %q %s", e.Def.Description, e.Def.InputSchema)
	}
	if n := strings.Count(s.log.String(), "a tool is not listed"); n != 1 || !strings.Contains(s.log.String(), `bad name*`) {
		t.Errorf("want one line about the refused name, got %d:\n%s", n, s.log.String())
	}
	if !slices.Equal(names(s.servers.ServerTools("pool")), []string{"pool:read", "pool:titled"}) {
		t.Errorf("pool's tools: %v", names(s.servers.ServerTools("pool")))
	}
}

// The schema a call is checked against is the registered one, else the
// cached list of an installed server; nothing for what is not known.
func TestKnownSchemaFromTheTableOrTheCache(t *testing.T) {
	s := newSources(t, &config.Config{Servers: map[string]config.Server{"srv": {Name: "srv"}}}, nil)
	if _, ok := s.servers.KnownSchema("srv:read"); ok {
		t.Error("a schema for a tool nothing listed")
	}
	s.servers.Cache.Put(config.Server{Name: "srv"}, []*mcp.Tool{{Name: "read", InputSchema: map[string]any{"type": "object", "required": []any{"p"}}}})
	raw, ok := s.servers.KnownSchema("srv:read")
	var got map[string]any
	if !ok || json.Unmarshal(raw, &got) != nil || got["required"] == nil {
		t.Errorf("the cached schema: %s %v", raw, ok)
	}
	s.servers.RegisterTools(s.servers.ServerOf("srv:"), []*mcp.Tool{{Name: "read"}})
	if raw, ok := s.servers.KnownSchema("srv:read"); !ok || string(raw) != `{"type":"object"}` {
		t.Errorf("the registered schema wins: %s", raw)
	}
}

// A denied tool is not listed; pml:continue_workflow always is.
func TestListedToolsHideWhatIsDenied(t *testing.T) {
	s := newSources(t, &config.Config{Servers: map[string]config.Server{"srv": {Name: "srv"}}}, fakePerms{"srv:secret": call.Deny, call.ContinueTool: call.Deny})
	s.servers.RegisterTools(s.servers.ServerOf("srv:"), []*mcp.Tool{{Name: "open"}, {Name: "secret"}})
	var got []string
	for _, l := range s.servers.ListedTools() {
		got = append(got, l.Tool.Name+"="+l.Wire)
	}
	if !slices.Equal(got, []string{"srv:open=srv__open", call.ContinueTool + "=pml__continue_workflow"}) {
		t.Errorf("listed %v", got)
	}
}

// The cloud's names are namespace:action, each part by MCP's rule.
func TestCloudListable(t *testing.T) {
	s := newSources(t, nil, nil)
	for name, want := range map[string]bool{"tavily:search": true, "search": false, "ta*vily:search": false, "tavily:se/arch": true, "tavily:": false} {
		if got := s.servers.CloudListable("the PML cloud", &mcp.Tool{Name: name}); got != want {
			t.Errorf("%q: %v, want %v", name, got, want)
		}
	}
	if s.servers.CloudListable("the PML cloud", nil) {
		t.Error("a nil tool is listable")
	}
}

// A reload: a server removed leaves with its tools, one changed is handed
// over (its names point at the new server at once), one added is created.
func TestApplyRemovesHandsOverAndAdds(t *testing.T) {
	old := map[string]config.Server{"gone": {Name: "gone"}, "kept": {Name: "kept", Image: "v1"}}
	s := newSources(t, &config.Config{Servers: old}, nil)
	s.servers.RegisterTools(s.servers.ServerOf("gone:"), []*mcp.Tool{{Name: "t"}})
	s.servers.RegisterTools(s.servers.ServerOf("kept:"), []*mcp.Tool{{Name: "t"}})
	cur := map[string]config.Server{"kept": {Name: "kept", Image: "v2"}, "new": {Name: "new"}}
	s.servers.Apply(old, cur)
	if s.servers.ServerOf("gone:") != nil || s.servers.Table.Has("gone:t") {
		t.Error("a removed server stays")
	}
	if srv := s.servers.ServerOf("kept:"); srv == nil || srv.Cfg.Image != "v2" || !s.servers.Table.Has("kept:t") {
		t.Errorf("the changed server: %+v, its tool listed %v", srv, s.servers.Table.Has("kept:t"))
	}
	if s.servers.ServerOf("new:") == nil {
		t.Error("the added server is missing")
	}
	s.inflightWait()
}

func (s *sources) inflightWait() { s.servers.inflight.Wait() }

// pml images pull installs only what is allowed outright; the rest is
// reported, with how to allow it.
func TestPreinstallApprovedReportsWhatNeedsApproval(t *testing.T) {
	s := newSources(t, &config.Config{Servers: map[string]config.Server{
		"plain":  {Name: "plain"},
		"asked":  {Name: "asked", Install: &config.Install{Command: "npm", Args: []string{"install", "x@1.0.0"}}},
		"denied": {Name: "denied", Install: &config.Install{Command: "npm", Args: []string{"install", "y@1.0.0"}}},
	}}, fakePerms{"denied:*": call.Deny})
	got, err := s.servers.PreinstallApproved(context.Background())
	if err != nil || len(got) != 2 {
		t.Fatalf("%+v %v", got, err)
	}
	for _, r := range got {
		if !strings.HasPrefix(r.Status, "needs approval") || !strings.Contains(r.Status, `"`+r.Server+`:*"`) {
			t.Errorf("%s: %q", r.Server, r.Status)
		}
	}
}

// A registry server whose grant nobody gave does not start: its tools
// are not loaded and no environment is read; one of .pml.json needs none.
func TestARegistryServerWithoutItsGrantDoesNotLoad(t *testing.T) {
	s := newSources(t, nil, nil)
	srv := s.servers.Add(config.Server{Name: "reg", Image: "img", FromRegistry: true, EnvRequired: []string{"TOKEN"}})
	s.sb.env["TOKEN"] = "t"
	_, err := s.servers.Lookup(context.Background(), "reg:tool")
	if err == nil || !strings.Contains(err.Error(), "asks for what nobody granted it here") {
		t.Fatalf("lookup of an ungranted registry server: %v", err)
	}
	if err := srv.Prepare(s.grants, s.sb.ServerEnv); err == nil {
		t.Error("prepared without its grant")
	}
	if err := s.grants.Record(serverGrant(srv.Cfg)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Prepare(s.grants, s.sb.ServerEnv); err != nil {
		t.Errorf("prepared with its grant: %v", err)
	}
	mine := s.servers.Add(config.Server{Name: "mine", EnvRequired: []string{"MISSING"}})
	if err := mine.Prepare(s.grants, s.sb.ServerEnv); err == nil || !strings.Contains(err.Error(), "MISSING") {
		t.Errorf("a missing variable: %v", err)
	}
}
