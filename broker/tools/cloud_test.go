package tools

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/cloud"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/routing"
)

// In local mode nothing waits for the cloud, and a name the routing sends
// there is the cloud's unless something local has it.
func TestLocalModeIsReadyAndKnowsCloudNames(t *testing.T) {
	s := newSources(t, &config.Config{Servers: map[string]config.Server{"mine": {Name: "mine"}}}, nil)
	select {
	case <-s.cloud.Ready():
	default:
		t.Fatal("local mode waits for a cloud it does not contact")
	}
	if s.cloud.Client.Enabled() {
		t.Fatal("a client without a key is enabled")
	}
	s.cloud.Router().AddServer("tavily", "mine")
	if !s.cloud.IsCloudTool("tavily:search") {
		t.Error("tavily:search is not the cloud's")
	}
	if s.cloud.IsCloudTool("mine:tool") || s.cloud.IsCloudTool(call.ContinueTool) || s.cloud.IsCloudTool("filesystem:read_file") {
		t.Error("a local name is the cloud's")
	}
}

// The cloud's list: what runs here is left out (its calls never leave the
// machine), the rest listed as running in the cloud, with the keys each
// declares; a new list replaces the old.
func TestRegisterToolsListsOnlyWhatTheCloudRuns(t *testing.T) {
	s := newSources(t, nil, nil)
	s.cloud.Router().AddServer("tavily")
	s.cloud.RegisterTools([]*mcp.Tool{
		{Name: "tavily:search", Description: "Web search", Meta: mcp.Meta{cloud.EnvRequiredMeta: []any{"TAVILY_KEY"}}},
		{Name: "filesystem:read_file", Description: "not the cloud's"},
		{Name: call.ContinueTool},
		{Name: "tavily:bad name*"},
	})
	if got := names(s.servers.Table.List()); !slices.Equal(got, []string{"tavily:search"}) {
		t.Fatalf("listed %v", got)
	}
	e, _ := s.servers.Table.Get("tavily:search")
	if e.Def.Description != "Web search (runs in the PML cloud)" {
		t.Errorf("description %q", e.Def.Description)
	}
	if r := s.run(t, "tavily:search"); r.Text != "cloud ran tavily:search" {
		t.Errorf("run: %q", r.Text)
	}
	if k := s.cloud.KeyNames("tavily:search"); !slices.Equal(k, []string{"TAVILY_KEY"}) {
		t.Errorf("keys %v", k)
	}
	s.cloud.RegisterTools(nil)
	if s.servers.Table.Has("tavily:search") || len(s.cloud.KeyNames("tavily:search")) != 0 {
		t.Error("an empty list keeps the old tools")
	}
}

// A cloud tool whose key is not set is put to the person with the names
// of the missing keys and where to set them.
func TestAPIKeyApprovalNamesTheMissingKeys(t *testing.T) {
	s := newSources(t, nil, nil)
	s.cloud.Router().AddServer("tavily")
	s.cloud.RegisterTools([]*mcp.Tool{{Name: "tavily:search", Meta: mcp.Meta{cloud.EnvRequiredMeta: []any{"TAVILY_KEY", "OTHER_KEY"}}}})
	s.sb.env["OTHER_KEY"] = "set"
	a := s.cloud.APIKeyApproval(&workflow.Workflow{Type: workflow.ApprovalAPIKey, Tool: "tavily:search", Pattern: "tavily:*"})
	if !strings.Contains(a.Description, "with your own API key TAVILY_KEY, which is not set") || strings.Contains(a.Description, "OTHER_KEY") ||
		!strings.Contains(a.Description, filepath.Join(s.ws, ".env")) || !slices.Equal(a.Options, []string{"continue", "abort"}) {
		t.Errorf("%+v", a)
	}
	if v := a.Context["variables"].([]string); !slices.Equal(v, []string{"TAVILY_KEY"}) {
		t.Errorf("context %v", a.Context)
	}
}

// A registry http entry's tools go to the cloud with the variables it
// names, and what its calls send is its grant.
func TestAnHTTPEntryIsRoutedToTheCloudWithItsGrant(t *testing.T) {
	s := newSources(t, &config.Config{Cloud: config.Cloud{URL: "https://cloud.example.com"}}, nil)
	e := &registry.Entry{FQDN: "acme.tools.exf.server.abcd", Type: registry.TypeHTTP, Registry: "https://reg.example.com",
		Meta: &registry.Metadata{Type: registry.TypeHTTP, EnvRequired: []string{"AWS_KEY", "PML_API_KEY"}, ProxyTo: "https://collector.example.net/x"}}
	s.cloud.useEntry(e, "exf", "exf:read")
	if s.cloud.Router().Route("exf:read") != routing.Server {
		t.Error("the entry's namespace does not route to the cloud")
	}
	g, ok := s.cloud.RegGrantOf("exf:read")
	if !ok || !slices.Equal(g.Env, []string{"AWS_KEY"}) || !slices.Equal(g.Hosts, []string{"cloud.example.com", "collector.example.net"}) || g.Entry != "pml.mcp.exf.server" {
		t.Errorf("grant %+v", g)
	}
	if _, ok := s.cloud.RegGrantOf("exf:other"); ok {
		t.Error("a grant for a tool of no entry")
	}
	if !slices.Contains(s.cloud.KeyNames("exf:read"), "AWS_KEY") {
		t.Errorf("keys %v", s.cloud.KeyNames("exf:read"))
	}
}

// The cloud's list is cached for an offline start, vouched by this
// user's pml: a file anyone else wrote is not read.
func TestTheCloudsListIsCachedVouched(t *testing.T) {
	s := newSources(t, nil, nil)
	s.cloud.writeCloudTools([]*mcp.Tool{{Name: "tavily:search", Description: "d"}})
	path := filepath.Join(s.ws, cloudToolsFile)
	got, err := readCloudTools(s.ws, path)
	if err != nil || len(got) != 1 || got[0].Name != "tavily:search" {
		t.Fatalf("read back %v %v", got, err)
	}
	if k := Known(s.ws, &config.Config{}, []string{"pml:x"}); !slices.Equal(k.Names, []string{"pml:x", "tavily:search"}) {
		t.Errorf("known %v", k.Names)
	}
	data, _ := os.ReadFile(path)
	forged := strings.Replace(string(data), "tavily:search", "tavily:steal", 1)
	if err := os.WriteFile(path, []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readCloudTools(s.ws, path); err != errCloudToolsUnvouched {
		t.Errorf("an edited cache: %v", err)
	}
}
