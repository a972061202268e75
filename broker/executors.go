package broker

//lint:file-ignore SA1019 roots, sampling and logging are deprecated from MCP 2026-07-28 (SEP-2577), but the clients and servers pml serves today speak the revisions before it, where they are the protocol

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	sbx "github.com/pml-dev/pml/broker/sandbox"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/cloud"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/internal/inside"
	"github.com/pml-dev/pml/internal/upstream"
	"github.com/pml-dev/pml/policies"
)

// The executors live in package sandbox; what they need of the sources
// (a server, the cloud side, the deno capabilities' code) they reach
// through the small interfaces it declares, which the adapters here
// implement.

// sandbox is package sandbox's Sandbox with the registry grants
// (registry_grant.go) a registry server's start is checked against.
type sandbox struct {
	*sbx.Sandbox
	grants *entryGrants
}

// executorOf is the executor of srv's tools: its pooled container, or
// one per call ("lifetime": "per_call").
func (s *serverSet) executorOf(srv *server) executor {
	es := execServer{sb: s.sb, set: s, srv: srv}
	if srv.cfg.Lifetime == "per_call" {
		return sbx.NewPerCallExec(s.sb.Sandbox, es)
	}
	return sbx.NewPooledExec(s.sb.Sandbox, es)
}

// execServer is a configured server as its executor reaches it
// (sandbox.Server).
type execServer struct {
	sb  *sandbox
	set *serverSet
	srv *server
}

func (e execServer) Name() string              { return e.srv.cfg.Name }
func (e execServer) Session() *upstream.Server { return e.srv.up }
func (e execServer) Prepare() error            { return e.srv.prepare(e.sb) }
func (e execServer) Env() ([]string, error)    { return e.sb.envFor(e.srv.cfg) }
func (e execServer) Container() (container.Spec, []*mcp.Root) {
	return serverSpec(e.sb, e.set.deps, e.srv.cfg), serverRoots(e.sb.Workspace, e.srv.cfg)
}

// cloudTools is the cloud side as its executor reaches it
// (sandbox.CloudTools).
type cloudTools struct{ c *cloudSide }

func (t cloudTools) Client() *cloud.Client { return t.c.client }

func (t cloudTools) Keys(tool string) (map[string]string, error) {
	c := t.c
	if g, ok := c.regGrantOf(tool); ok && !c.sb.grants.granted(g) {
		// The approve layer asks first; this is the last guard before a
		// registry's choice of variables leaves the machine.
		return nil, fmt.Errorf("%w: %s comes from a registry entry whose calls would send %s, which you have not granted; nothing was sent. Call it again to be asked, or add it with `pml add`, which shows it",
			ErrRefused, tool, shownGrant(g))
	}
	keys, missing := byokFor(c.sb, c, tool)
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s needs %s, which is not set: %s", ErrCloud, tool, strings.Join(missing, ", "), whereToSet(c.sb.Workspace))
	}
	return keys, nil
}

func (t cloudTools) Decide(tool string) (Decision, string) { return t.c.decide(tool) }
func (t cloudTools) PermissionSource() string              { return t.c.permSource() }

// Program is the program that runs tool of a deno capability and what
// the capability declares (sandbox.Capabilities).
func (r *registrySide) Program(tool string, args map[string]any) (execute.Program, []string, bool) {
	e := r.denoOf(tool)
	if e == nil {
		return execute.Program{}, nil, false
	}
	_, fn, _ := strings.Cut(tool, ":")
	return execute.Program{Module: e.Code, Export: exportFor(e.Code, e.FQDN, fn), Args: args}, e.Meta.Declared(), true
}

func whereToSet(ws string) string {
	return fmt.Sprintf("add it to %s or to the env of the pml entry in your MCP client's configuration (e.g. .mcp.json)", filepath.Join(ws, ".env"))
}

// byokFor reads the variables a cloud tool declares from pml's environment,
// else the workspace's .env. It returns the values and the missing names.
func byokFor(sb *sandbox, c *cloudSide, tool string) (map[string]string, []string) {
	c.mu.Lock()
	names := append([]string(nil), c.env[tool]...)
	names = append(names, c.regEnv[tool]...)
	c.mu.Unlock()
	if len(names) == 0 {
		return nil, nil
	}
	sb.Guard.Verify(".env")
	dotenv, err := readDotEnv(sb.Workspace)
	if err != nil {
		// The keys it would hold are reported missing; this says why.
		sb.Log.Error().Err(err).Str("tool", tool).Msg("the workspace's .env is not read")
	}
	vals := map[string]string{}
	var missing []string
	for _, n := range names {
		if ownVariable(n) {
			sb.Log.Warn().Str("tool", tool).Str("variable", n).Msg("a tool asked for one of pml's own variables; it is never sent")
			continue
		}
		if v, ok := os.LookupEnv(n); ok && v != "" {
			vals[n] = v
		} else if v := dotenv[n]; v != "" {
			vals[n] = v
		} else {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	return vals, missing
}

// newSandbox builds the sandbox of a broker: the runtime goes through
// this pml's cap (limitRuntime), and its egress proxies write to log.
func newSandbox(o Options, pol policies.Policy, owner container.Owner, log *audit.Log) *sandbox {
	rt, limited := limitRuntime(o)
	user := runtimeUser(o.Runtime, chooseUser(o.Config.Sandbox.User, o.Workspace), o.Config.Sandbox.User)
	var programs sbx.Programs = sbx.ProgramFunc(o.Inside)
	if o.Inside == nil {
		programs = inside.NewSource(o.Runtime)
	}
	egress := sbx.NewEgressSet(log, o.Logger, user)
	egress.Shell.Store(&o.Config.Sandbox.Network.Rules)
	return &sandbox{Sandbox: sbx.New(sbx.Options{Workspace: o.Workspace, User: user, Runtime: rt, Limited: limited,
		Programs: programs, Owner: owner, Policy: pol, Config: o.Config.Sandbox, Servers: o.Config.Servers,
		Egress: egress, Logger: o.Logger})}
}
