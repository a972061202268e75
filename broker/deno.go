package broker

import (
	"context"
	"fmt"
	"strings"

	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/toolbox"
)

// registerDenoCapability makes each exported function of a deno
// capability a tool ns:function (pml run), fetched again from the
// registry: the cached copy when none answers.
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
	cs.listDeno(c, e)
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
func (e denoExec) Run(ctx context.Context, c *Call, def toolbox.Tool, args map[string]any) Result {
	ns, fn, _ := strings.Cut(def.Name, ":")
	e.registry.mu.Lock()
	entry := e.registry.deno[ns]
	e.registry.mu.Unlock()
	if entry == nil {
		return errorResult(fmt.Errorf("%w %q: its capability's code is not loaded", ErrNotFound, def.Name))
	}
	// Its declared tools were checked on the way here (layer_declared.go),
	// unless the capability was loaded since: then it does not run
	// unchecked.
	if len(entry.Meta.Declared()) > 0 && c.UpFrontFor(def.Name) == nil {
		return errorResult(fmt.Errorf("%w: %s was not run: its capability's declared tools were not checked against the permissions before the run (it was loaded meanwhile); call it again", ErrUnavailable, def.Name))
	}
	return e.runs.Start(ctx, c, def.Name, execute.Program{Module: entry.Code, Export: exportFor(entry.Code, entry.FQDN, fn), Args: args})
}
