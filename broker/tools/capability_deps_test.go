package tools

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/toolbox"
)

const testDepSRI = "sha512-5U3OZh8Xq0Li4nA26l6uNvV9/1suMDuWSn+NjLZIhzinhMY6N3A4DCrxVecBGPf2PsNFKTEv5krxGPRwzxc7jQ=="

// fakeServers is the servers a capability sees (serverSet), recording
// what it adds and installs.
type fakeServers struct {
	servers map[string]*Server
	did     []string
}

func (f *fakeServers) ServerOf(tool string) *Server {
	ns, _, _ := strings.Cut(tool, ":")
	return f.servers[ns]
}

func (f *fakeServers) Add(cfg config.Server) *Server {
	f.did = append(f.did, "add "+cfg.Name)
	s := &Server{Cfg: cfg}
	f.servers[cfg.Name] = s
	return s
}

// Installed: a server with an install step is not installed yet.
func (f *fakeServers) Installed(cfg config.Server) bool { return cfg.Install == nil }

func (f *fakeServers) Install(_ context.Context, srv *Server) error {
	f.did = append(f.did, "install "+srv.Cfg.Name+" "+srv.Cfg.Install.Integrity)
	return nil
}

func (f *fakeServers) List() []*Server {
	var out []*Server
	for _, n := range sortedKeys(f.servers) {
		out = append(out, f.servers[n])
	}
	return out
}

func (f *fakeServers) ReplaceTools(old []string, defs []toolbox.Tool, _ Executor) []string {
	var out []string
	for _, d := range defs {
		out = append(out, d.Name)
	}
	return out
}

// fakeApprovals writes an install's approval as "install NAME".
type fakeApprovals struct{}

func (fakeApprovals) Approval(wf *workflow.Workflow) workflow.Approval {
	return workflow.Approval{Description: wf.Tool}
}

func (fakeApprovals) DependencyApproval(wf *workflow.Workflow, srv config.Server) workflow.Approval {
	return workflow.Approval{Description: "install " + srv.Name}
}

func (fakeApprovals) ServerAccess(config.Server) approve.Access { return approve.Access{} }

// depCaps is a capabilities with the servers in servers, recording what
// it adds and installs.
func depCaps(t *testing.T, servers map[string]*Server) (*Capabilities, *[]string) {
	fs := &fakeServers{servers: servers}
	cs := &Capabilities{log: zerolog.Nop(), servers: fs, Ask: fakeApprovals{}}
	return cs, &fs.did
}

func depEntry(t *testing.T) *registry.Entry {
	f, _ := registry.ParseFQDN("casys.pml.smartsearch.server")
	m, err := registry.ParseMetadata(f, []byte(`{"type": "deno", "code_url": "https://example.com/c.ts", "mcp_deps": [
	 {"name": "memory", "install": "npx @modelcontextprotocol/server-memory@1.2.3", "version": "1.2.3", "integrity": "`+testDepSRI+`", "env_required": ["MEMORY_KEY"]},
	 {"name": "files", "install": "npx @x/server-files@2.0.0", "integrity": "`+testDepSRI+`"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return &registry.Entry{FQDN: "casys.pml.smartsearch.server.abcd", Type: registry.TypeDeno, Meta: m}
}

// A dependency already configured here is used as it is (local
// configuration wins); the other is added and installed, pinned, after
// the person confirmed; c.Requires lists both.
func TestReadyDepsInstallsWhatIsNotConfigured(t *testing.T) {
	mine := &Server{Cfg: config.Server{Name: "files", Image: "mine:1"}}
	cs, did := depCaps(t, map[string]*Server{"files": mine})
	c := Capability{Name: "smartSearch"}
	var asked []string
	err := cs.readyDeps(context.Background(), depEntry(t), &c, func(a workflow.Approval) bool { asked = append(asked, a.Description); return true })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(*did, "; "); got != "add memory; install memory "+testDepSRI {
		t.Errorf("did %q", got)
	}
	if strings.Join(asked, ";") != "install memory" {
		t.Errorf("asked %q", asked)
	}
	if len(c.Requires) != 2 || c.Requires[0].Name != "memory" || c.Requires[0].Server == nil || c.Requires[0].Server.Install.Package != "@modelcontextprotocol/server-memory" ||
		c.Requires[1].Name != "files" || !c.Requires[1].Configured || c.Requires[1].Server != nil {
		t.Errorf("requires: %+v", c.Requires)
	}
	if strings.Join(c.Requires[0].EnvRequired, ",") != "MEMORY_KEY" {
		t.Errorf("env_required: %+v", c.Requires[0])
	}
	if !strings.Contains(c.Requires[0].Grants, "It runs in a container of the image") {
		t.Errorf("grants: %q", c.Requires[0].Grants)
	}
}

// An install the person refuses adds nothing and says which.
func TestReadyDepsRefused(t *testing.T) {
	cs, did := depCaps(t, map[string]*Server{})
	c := Capability{Name: "smartSearch"}
	err := cs.readyDeps(context.Background(), depEntry(t), &c, func(workflow.Approval) bool { return false })
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "installing memory (which smartSearch requires) was not approved") {
		t.Errorf("%v", err)
	}
	if strings.Contains(strings.Join(*did, ";"), "install") {
		t.Errorf("installed: %v", *did)
	}
}

// Before a run: a dependency that is no server here, or not installed,
// refuses the capability, naming it and how to fix it.
func TestDepsMissing(t *testing.T) {
	cs, _ := depCaps(t, map[string]*Server{"files": {Cfg: config.Server{Name: "files"}},
		"memory": {Cfg: config.Server{Name: "memory", Install: &config.Install{Command: "npm", Integrity: testDepSRI}}}})
	err := cs.depsMissing("smartSearch", depEntry(t))
	if err == nil || !strings.Contains(err.Error(), "smartSearch requires the MCP servers memory (not installed): run `pml add smartSearch` again") {
		t.Errorf("%v", err)
	}
	cs, _ = depCaps(t, map[string]*Server{"files": {Cfg: config.Server{Name: "files"}}, "memory": {Cfg: config.Server{Name: "memory"}}})
	if err := cs.depsMissing("smartSearch", depEntry(t)); err != nil {
		t.Errorf("all there: %v", err)
	}
	cs, _ = depCaps(t, map[string]*Server{})
	if err := cs.depsMissing("smartSearch", depEntry(t)); err == nil || !strings.Contains(err.Error(), "memory (not a server in .pml.json") || !strings.Contains(err.Error(), "files (not a server") {
		t.Errorf("none there: %v", err)
	}
}

// A configured server that is not installed yet is installed as it is
// configured (its own image and integrity), never replaced by the
// registry's.
func TestReadyDepsInstallsAConfiguredServerAsConfigured(t *testing.T) {
	mine := &Server{Cfg: config.Server{Name: "memory", Image: "mine:1", Install: &config.Install{Command: "npm", Args: []string{"install", "mine@1.0.0"}, Integrity: "sha512-mine"}}}
	cs, did := depCaps(t, map[string]*Server{"memory": mine, "files": {Cfg: config.Server{Name: "files"}}})
	c := Capability{Name: "smartSearch"}
	if err := cs.readyDeps(context.Background(), depEntry(t), &c, func(workflow.Approval) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(*did, "; "); got != "install memory sha512-mine" {
		t.Errorf("did %q", got)
	}
	if !c.Requires[0].Configured || c.Requires[0].Server != nil {
		t.Errorf("requires: %+v", c.Requires)
	}
}
