package tools

import (
	"context"
	"strings"

	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/internal/registry"
)

// The deno entries a registry served (a capability added with pml add, a
// tool call that found one): their code, and what it declares it calls.

// registerDeno makes each exported function of a deno
// capability a tool ns:function (pml run), fetched again from the
// registry: the cached copy when none answers.
func (cs *Capabilities) registerDeno(ctx context.Context, c Capability) {
	e, v, err := cs.registry.FetchChecked(ctx, c.FQDN)
	if err != nil {
		cs.log.Warn().Err(err).Str("capability", c.Name).Msg("the capability's code cannot be loaded")
		return
	}
	if v.Status == registry.StatusMismatch {
		cs.log.Warn().Str("capability", c.Name).Msg("the capability's code changed since it was added; run `pml add " + c.Name + "` to review it")
		return
	}
	cs.listDeno(c, e)
}

// setDeno holds the deno entry e of namespace ns; dropDeno lets it go.
func (r *Registry) setDeno(ns string, e *registry.Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deno[ns] = e
}

func (r *Registry) dropDeno(ns string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.deno, ns)
}

// DeclaredBy is what the deno capability that provides tool declares
// its code calls (tools_used and client_tools), nil for any other tool.
func (r *Registry) DeclaredBy(tool string) []string {
	if e := r.DenoOf(tool); e != nil {
		return e.Meta.Declared()
	}
	return nil
}

// RequiredBy are the servers the deno capability that provides tool
// requires (its mcp_deps), nil for any other tool.
func (r *Registry) RequiredBy(tool string) []string {
	e := r.DenoOf(tool)
	if e == nil || e.Meta == nil {
		return nil
	}
	out := make([]string, 0, len(e.Meta.McpDeps))
	for _, d := range e.Meta.McpDeps {
		out = append(out, d.Name)
	}
	return out
}

// DenoOf is the loaded deno capability entry that provides tool, nil when
// none does.
func (r *Registry) DenoOf(tool string) *registry.Entry {
	ns, _, ok := strings.Cut(tool, ":")
	if !ok {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deno[ns]
}

// Program is the program that runs tool of a deno capability, and what
// the capability declares (the deno executor's sandbox.Capabilities).
func (r *Registry) Program(tool string, args map[string]any) (execute.Program, []string, bool) {
	e := r.DenoOf(tool)
	if e == nil {
		return execute.Program{}, nil, false
	}
	_, fn, _ := strings.Cut(tool, ":")
	return execute.Program{Module: e.Code, Export: ExportFor(e.Code, e.FQDN, fn), Args: args}, e.Meta.Declared(), true
}
