package tools

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/entrygrant"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/registry/serve"
	"github.com/pml-dev/pml/internal/toolbox"
)

const regfakeMeta = `{"type": "stdio", "description": "a fake server%s", "tools": ["regfake:echo", "regfake:boom"], "image": "fake-image"}`

// registrySources are the sources of a workspace whose registry serves
// regfake (a stdio server) and mathx (a deno module); dir is the
// registry's directory.
func registrySources(t *testing.T, perms fakePerms) (s *sources, dir string) {
	t.Helper()
	dir = t.TempDir()
	write(t, dir, "pml.mcp.regfake.server.json", fmt.Sprintf(regfakeMeta, ""))
	write(t, dir, "acme.tools.mathx.double.ts", "export function double(n: number) { return 2 * n }\nexport async function half(n: number) { return n / 2 }\n")
	h, err := serve.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return newSources(t, &config.Config{Registries: []string{srv.URL}, RegistriesSet: true}, perms), dir
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A registry name has a namespace that is not built in.
func TestRegistryCandidate(t *testing.T) {
	for name, want := range map[string]bool{"regfake:echo": true, "filesystem:read_file": false, "shell:exec": false, "pml:x": false, "noaction:": false, "plain": false} {
		if got := RegistryCandidate(name); got != want {
			t.Errorf("%q: %v, want %v", name, got, want)
		}
	}
	if fqdnFor("regfake:echo") != "pml.mcp.regfake.server" {
		t.Error(fqdnFor("regfake:echo"))
	}
}

// In local mode with the default registry nothing is looked up; a
// configured registry is.
func TestRegistryLookupsNeedARegistryOrTheCloud(t *testing.T) {
	if s := newSources(t, nil, nil); s.registry.Lookups() || s.registry.Resolvable("regfake:echo") {
		t.Error("local mode looks names up in the default registry")
	}
	s, _ := registrySources(t, nil)
	if !s.registry.Lookups() || !s.registry.Resolvable("regfake:echo") || s.registry.Resolvable("filesystem:x") {
		t.Error("a configured registry is not used")
	}
	s.servers.Table.Add(toolbox.Tool{Name: "regfake:echo"}, sourceExec("x"))
	if s.registry.Resolvable("regfake:echo") {
		t.Error("a registered tool is resolvable (it is known)")
	}
}

// A stdio entry becomes a server; a name no registry has is not found,
// and the answer is kept for the session.
func TestResolveMakesAStdioEntryAServer(t *testing.T) {
	s, dir := registrySources(t, nil)
	ch, err := s.registry.Resolve(context.Background(), "regfake:echo")
	if err != nil || ch != nil {
		t.Fatalf("resolve: %v %v", ch, err)
	}
	srv := s.servers.ServerOf("regfake:echo")
	if srv == nil || !srv.Cfg.FromRegistry || srv.Cfg.Image != "fake-image" {
		t.Fatalf("the server: %+v", srv)
	}
	if _, err := os.Stat(filepath.Join(s.ws, ".pml", "mcp.lock")); err != nil {
		t.Errorf("not locked: %v", err)
	}
	_, err = s.registry.Resolve(context.Background(), "nothere:tool")
	if !errors.Is(err, call.ErrNotFound) {
		t.Fatalf("a missing namespace: %v", err)
	}
	write(t, dir, "pml.mcp.nothere.server.json", fmt.Sprintf(regfakeMeta, ""))
	if _, again := s.registry.Resolve(context.Background(), "nothere:tool"); again == nil || again.Error() != err.Error() {
		t.Errorf("asked again in one session: %v", again)
	}
}

// An entry that changed since it was locked is a change to approve, and
// nothing of it is used until it is.
func TestAChangedEntryIsAnIntegrityChange(t *testing.T) {
	s, dir := registrySources(t, nil)
	if _, err := s.registry.Resolve(context.Background(), "regfake:echo"); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "pml.mcp.regfake.server.json", fmt.Sprintf(regfakeMeta, ", changed"))
	g, _ := registrySourcesIn(t, s.ws, dir)
	ch, err := g.registry.Resolve(context.Background(), "regfake:echo")
	if err != nil || ch == nil {
		t.Fatalf("a changed entry: %v %v", ch, err)
	}
	if g.servers.ServerOf("regfake:") != nil {
		t.Error("the changed entry's server was added before the approval")
	}
	a := g.registry.IntegrityApproval(&workflow.Workflow{Type: workflow.ApprovalIntegrity, Tool: "regfake:echo", Data: ch})
	if a.Context["fqdn"] == nil || a.Context["old_integrity"] == a.Context["new_integrity"] || !slices.Equal(a.Options, []string{"continue", "abort"}) ||
		!strings.Contains(a.Description, "Continue trusts the new version") {
		t.Errorf("%+v", a)
	}
}

// registrySourcesIn is registrySources for workspace ws and a registry
// already serving dir (a second session).
func registrySourcesIn(t *testing.T, ws, dir string) (*sources, string) {
	t.Helper()
	h, err := serve.New(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s := newSources(t, &config.Config{Registries: []string{srv.URL}, RegistriesSet: true}, nil)
	// The same workspace: the lockfile of the first session.
	s.ws = ws
	s.sb.ws = ws
	s.registry = NewRegistry(RegistryOptions{Sandbox: s.sb, Config: &config.Config{Registries: []string{srv.URL}, RegistriesSet: true}, Log: zerolog.Nop(), Cloud: s.cloud, Servers: s.servers, Permissions: fakePerms{}, Grants: s.grants})
	s.registry.Ask = textApprovals{}
	return s, dir
}

// A deno entry's exported functions become tools of its namespace, run
// by the deno executor (a name outside MCP's rule is left out); its code
// is the registry's, held for the executor.
func TestADenoEntrysFunctionsAreListed(t *testing.T) {
	s := newSources(t, nil, nil)
	e := &registry.Entry{FQDN: "acme.tools.mathx.double.abcd", Type: registry.TypeDeno,
		Code: "export function double(n) { return 2 * n }\nexport async function half(n) { return n / 2 }\nexport const $bad = () => 1\n"}
	got := s.caps.ListEntry(e, "mathx")
	if !slices.Equal(got, []string{"mathx:double", "mathx:half"}) {
		t.Fatalf("tools %v", got)
	}
	if r := s.run(t, "mathx:half"); r.Text != "deno ran mathx:half" {
		t.Errorf("run: %q", r.Text)
	}
	if d := s.registry.DenoOf("mathx:double"); d != e || s.registry.DenoOf("other:x") != nil {
		t.Errorf("the entry: %+v", d)
	}
	if s.registry.DeclaredBy("mathx:double") != nil || s.registry.RequiredBy("mathx:double") != nil {
		t.Error("something declared by an entry that declares nothing")
	}
	if !strings.Contains(s.log.String(), "a function of the capability is not listed") {
		t.Errorf("the refused name is not said: %s", s.log.String())
	}
	ed, _ := s.servers.Table.Get("mathx:double")
	if !strings.Contains(ed.Def.Description, "runs the capability's function double") || string(ed.Def.InputSchema) != `{"type":"object"}` {
		t.Errorf("the tool: %+v", ed.Def)
	}
}

// What an entry's deno code declares and requires is read from its
// metadata.
func TestDeclaredAndRequiredByADenoEntry(t *testing.T) {
	s := newSources(t, nil, nil)
	s.registry.SetDenoForTest("cap", &registry.Entry{FQDN: "acme.tools.cap.main.abcd", Type: registry.TypeDeno,
		Meta: &registry.Metadata{Type: registry.TypeDeno, ToolsUsed: []string{"filesystem:read_file"}, McpDeps: []registry.McpDep{{Name: "memory"}}}})
	if d := s.registry.DeclaredBy("cap:main"); !slices.Equal(d, []string{"filesystem:read_file"}) {
		t.Errorf("declared %v", d)
	}
	if r := s.registry.RequiredBy("cap:main"); !slices.Equal(r, []string{"memory"}) {
		t.Errorf("required %v", r)
	}
	s.registry.dropDeno("cap")
	if s.registry.DenoOf("cap:main") != nil {
		t.Error("a dropped entry is still held")
	}
}

// A registry entry's grant is asked for until the person gives it; a
// server of .pml.json and a tool of no entry need none.
func TestGrantNeededUntilRecorded(t *testing.T) {
	s, _ := registrySources(t, nil)
	if _, err := s.registry.Resolve(context.Background(), "regfake:echo"); err != nil {
		t.Fatal(err)
	}
	g, ok := s.registry.GrantNeeded("regfake:echo")
	if !ok || g.(*entrygrant.Grant).Image != "fake-image" {
		t.Fatalf("grant needed: %+v %v", g, ok)
	}
	wf := &workflow.Workflow{ID: "w1", Type: workflow.ApprovalRegistryGrant, Tool: "regfake:echo", Data: g}
	a := s.registry.GrantApproval(wf)
	if a.Context["grant_image"] != "fake-image" || a.Context["entry"] != "pml.mcp.regfake.server" || !strings.Contains(a.Description, "for this session only") {
		t.Errorf("%+v", a)
	}
	if err := s.registry.RecordGrant(wf); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.registry.GrantNeeded("regfake:echo"); ok {
		t.Error("asked again once granted")
	}
	if err := s.registry.RecordGrant(&workflow.Workflow{ID: "w2"}); err == nil {
		t.Error("a workflow without a grant recorded")
	}
	s.servers.Add(config.Server{Name: "mine", Image: "x"})
	if _, ok := s.registry.GrantNeeded("mine:tool"); ok {
		t.Error("a server of .pml.json needs a grant")
	}
	if _, ok := s.registry.GrantNeeded("nothing:tool"); ok {
		t.Error("a tool of no entry needs a grant")
	}
}

// What a registry server gets of this machine: its variables (pml's own
// never), its network's hosts, its image unless it is pml's node image.
func TestServerGrant(t *testing.T) {
	g := serverGrant(config.Server{Name: "x", Image: registry.NodeImage, EnvRequired: []string{"TOKEN", "PML_API_KEY"}})
	if !slices.Equal(g.Env, []string{"TOKEN"}) || g.Image != "" || g.Entry != "pml.mcp.x.server" || len(g.Hosts) != 0 {
		t.Errorf("%+v", g)
	}
	if hostOf("::bad") != "?" || hostOf("https://a.example:8443/p") != "a.example:8443" {
		t.Error(hostOf("::bad"), hostOf("https://a.example:8443/p"))
	}
}

// The stdio servers a workspace fetched in an earlier session are known
// again at the next one's tools/list (Registry.LoadServers, before the
// servers load), without a call asking for them.
func TestLockedRegistryServersAreKnownAgain(t *testing.T) {
	s, dir := registrySources(t, nil)
	if _, err := s.registry.Resolve(context.Background(), "regfake:echo"); err != nil {
		t.Fatal(err)
	}
	g, _ := registrySourcesIn(t, s.ws, dir)
	if g.servers.ServerOf("regfake:") != nil {
		t.Fatal("known before LoadServers")
	}
	g.registry.LoadServers(context.Background())
	if srv := g.servers.ServerOf("regfake:"); srv == nil || !srv.Cfg.FromRegistry {
		t.Errorf("the locked server: %+v", srv)
	}
}
