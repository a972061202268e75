package tools

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/netallow"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/policies"
)

// The sources' fakes: a sandbox that starts nothing, executors that say
// which source they run, permissions from a table, approval texts that
// name what they describe.

// fakeSandbox is a workspace without an engine: nothing can start.
type fakeSandbox struct {
	ws string
	// rt is the engine (nil: none).
	rt container.Runtime
	// env are the host's variables (HostValues, ServerEnv).
	env map[string]string
	// owner is this pml's identity (zero: none).
	owner container.Owner
}

func (f *fakeSandbox) Workspace() string          { return f.ws }
func (f *fakeSandbox) Runtime() container.Runtime { return f.rt }
func (f *fakeSandbox) User() string               { return "1000:1000" }
func (f *fakeSandbox) Owner() container.Owner     { return f.owner }
func (f *fakeSandbox) Labels(purpose string) map[string]string {
	return map[string]string{"purpose": purpose}
}
func (f *fakeSandbox) ServerSpec(_ *deps.Store, cfg config.Server) container.Spec {
	return container.Spec{Image: cfg.Image}
}
func (f *fakeSandbox) ServerPolicy(config.Server) policies.Policy { return policies.Default() }
func (f *fakeSandbox) ServerMounts(config.Server) ([]container.Mount, error) {
	return nil, nil
}
func (f *fakeSandbox) ServerEnv(cfg config.Server) ([]string, error) {
	var env []string
	for _, n := range cfg.EnvRequired {
		v, ok := f.env[n]
		if !ok {
			return nil, fmt.Errorf("%s needs %s", cfg.Name, n)
		}
		env = append(env, n+"="+v)
	}
	return env, nil
}
func (f *fakeSandbox) Supervisor(context.Context) string { return "" }
func (f *fakeSandbox) WithEgress(*container.Spec, string, string, string, netallow.Rules) error {
	return nil
}
func (f *fakeSandbox) LimitsNote(context.Context) string { return "" }
func (f *fakeSandbox) HostValues(_ string, names []string) (map[string]string, []string) {
	vals := map[string]string{}
	var missing []string
	for _, n := range names {
		if v, ok := f.env[n]; ok {
			vals[n] = v
		} else {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	return vals, missing
}

// sourceExec answers every call with the name of the source it runs.
type sourceExec string

func (e sourceExec) Run(_ context.Context, _ *call.Call, def toolbox.Tool, _ map[string]any) call.Result {
	return call.Result{Text: string(e) + " ran " + def.Name}
}

// fakeExecutors gives each source a sourceExec naming it.
type fakeExecutors struct{}

func (fakeExecutors) Server(srv *Server) Executor {
	if srv.Cfg.Lifetime == "per_call" {
		return sourceExec("per call " + srv.Cfg.Name)
	}
	return sourceExec("pooled " + srv.Cfg.Name)
}
func (fakeExecutors) Deno() Executor  { return sourceExec("deno") }
func (fakeExecutors) Cloud() Executor { return sourceExec("cloud") }

// fakePerms decides by exact pattern ("ns:*" or a tool), else asks.
type fakePerms map[string]call.Decision

func (p fakePerms) Unlisted(tool string) (call.Decision, string, bool) {
	if d, ok := p[tool]; ok {
		return d, tool, true
	}
	return call.Deny, "", false
}

func (p fakePerms) Decide(tool string) (call.Decision, string) {
	if d, ok := p[tool]; ok {
		return d, tool
	}
	ns, _, _ := strings.Cut(tool, ":")
	if d, ok := p[ns+":*"]; ok {
		return d, ns + ":*"
	}
	return call.Ask, ""
}

// logBuf collects log lines.
type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// sources is the sources of one workspace, wired as broker's New wires
// them, over the fakes.
type sources struct {
	ws       string
	sb       *fakeSandbox
	log      *logBuf
	servers  *Servers
	cloud    *Cloud
	registry *Registry
	caps     *Capabilities
	grants   *Grants
}

// newSources wires the sources of a new workspace configured with cfg
// (local mode: no API key, no registry is asked).
func newSources(t *testing.T, cfg *config.Config, perms fakePerms) *sources {
	t.Helper()
	t.Setenv("PML_API_KEY", "")
	ws := t.TempDir()
	if cfg == nil {
		cfg = &config.Config{}
	}
	s := &sources{ws: ws, sb: &fakeSandbox{ws: ws, env: map[string]string{}}, log: &logBuf{}}
	lg := zerolog.New(s.log)
	s.grants = NewGrants(nil, ws, lg)
	router := NewRouter(ws, cfg.Servers)
	s.servers = NewServers(ServersOptions{Sandbox: s.sb, Log: lg, Progress: lg,
		Cache: &Cache{Path: filepath.Join(ws, ".pml", "tools-cache.json")},
		Base:  context.Background(), Inflight: &sync.WaitGroup{},
		Router: router, Executors: fakeExecutors{}, Grants: s.grants, Permissions: perms}, cfg.Servers)
	s.cloud = NewCloud(CloudOptions{Sandbox: s.sb, Config: cfg, Log: lg, Router: router, Servers: s.servers, Executors: fakeExecutors{}})
	s.registry = NewRegistry(RegistryOptions{Sandbox: s.sb, Config: cfg, Log: lg, Cloud: s.cloud, Servers: s.servers, Permissions: perms, Grants: s.grants})
	s.caps = NewCapabilities(CapabilitiesOptions{Sandbox: s.sb, Log: lg, Registry: s.registry, Cloud: s.cloud, Servers: s.servers, Executors: fakeExecutors{}, Grants: s.grants})
	s.cloud.Ask, s.registry.Ask, s.caps.Ask = textApprovals{}, textApprovals{}, textApprovals{}
	return s
}

// textApprovals write an approval as the kind and tool it is about.
type textApprovals struct{}

func (textApprovals) Approval(wf *workflow.Workflow) workflow.Approval {
	return workflow.Approval{ApprovalRequired: true, ApprovalType: wf.Type, Tool: wf.Tool, Description: string(wf.Type) + " " + wf.Tool}
}

func (textApprovals) DependencyApproval(wf *workflow.Workflow, srv config.Server) workflow.Approval {
	return workflow.Approval{ApprovalRequired: true, ApprovalType: workflow.ApprovalDependency, Tool: wf.Tool, Description: "install " + srv.Name}
}

func (textApprovals) ServerAccess(config.Server) approve.Access {
	return approve.Access{}
}

// run calls tool through the table, as the execute step does.
func (s *sources) run(t *testing.T, tool string) call.Result {
	t.Helper()
	e, ok := s.servers.Table.Get(tool)
	if !ok {
		t.Fatalf("%s is not in the tool table", tool)
	}
	return e.Exec.Run(context.Background(), call.NewCall(call.Request{Tool: tool}), e.Def, nil)
}
