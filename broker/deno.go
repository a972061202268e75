package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/toolbox"
)

// registerDenoCapability makes each exported function of a deno
// capability a tool ns:function.
func (cs *capabilities) registerDenoCapability(ctx context.Context, c Capability) {
	e, v, err := cs.registry.fetchChecked(ctx, c.FQDN)
	if err != nil {
		cs.log.Warn().Err(err).Str("capability", c.Name).Msg("the capability's code cannot be loaded")
		return
	}
	if v.Status == registry.StatusMismatch {
		cs.log.Warn().Str("capability", c.Name).Msg("the capability's code changed since it was added; run `pml add " + c.Name + "` to review it")
		return
	}
	cs.registry.mu.Lock()
	cs.registry.deno[c.Namespace] = e
	cs.registry.mu.Unlock()
	// Its functions run here, whatever the cloud routes under that name.
	cs.cloud.router.AddLocal(c.Namespace)
	var defs []toolbox.Tool
	for _, fn := range ExportedFunctions(e.Code) {
		defs = append(defs, toolbox.Tool{
			Name:        c.Namespace + ":" + fn,
			Description: fmt.Sprintf("%s (from %s): runs the capability's function %s with the arguments object.", fn, c.FQDN, fn),
			InputSchema: json.RawMessage(`{"type":"object"}`),
		})
	}
	var exec executor = denoExec{registry: cs.registry, runs: cs.runs}
	if err := cs.depsMissing(c.Name, e); err != nil { // its mcp_deps (capability_deps.go)
		cs.log.Warn().Str("capability", c.Name).Msg(err.Error())
		exec = refusedExec{err}
	}
	cs.replaceTools(nil, defs, exec)
}

// denoExec runs the exported functions of deno capabilities (pml add):
// the code fetched from the registry, held by registry.
type denoExec struct {
	registry *registrySide
	runs     *codeRuns
}

// run runs one exported function of a deno capability in a
// Deno container, like the cloud's execute_locally code: its mcp.* calls
// come back through the request path.
func (e denoExec) run(ctx context.Context, def toolbox.Tool, args map[string]any) Result {
	ns, fn, _ := strings.Cut(def.Name, ":")
	e.registry.mu.Lock()
	entry := e.registry.deno[ns]
	e.registry.mu.Unlock()
	if entry == nil {
		return errorResult(fmt.Errorf("%w %q: its capability's code is not loaded", ErrNotFound, def.Name))
	}
	return e.runs.Start(ctx, def.Name, execute.Program{Module: entry.Code, Export: fn, Args: args})
}
