package broker

import (
	"context"
	"fmt"
	"strings"

	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/internal/toolbox"
)

// denoExec runs the exported functions of deno capabilities (pml add):
// the code fetched from the registry, held by registry.
type denoExec struct {
	registry *tl.Registry
	runs     *codeRuns
}

// run runs one exported function of a deno capability in a
// Deno container, like the cloud's execute_locally code: its mcp.* calls
// come back through the request path.
func (e denoExec) Run(ctx context.Context, def toolbox.Tool, args map[string]any) Result {
	ns, fn, _ := strings.Cut(def.Name, ":")
	entry := e.registry.DenoOf(ns + ":")
	if entry == nil {
		return errorResult(fmt.Errorf("%w %q: its capability's code is not loaded", ErrNotFound, def.Name))
	}
	// Its declared tools were checked on the way here (layer_declared.go),
	// unless the capability was loaded since: then it does not run
	// unchecked.
	if len(entry.Meta.Declared()) > 0 && call.UpFrontOf(ctx, def.Name) == nil {
		return errorResult(fmt.Errorf("%w: %s was not run: its capability's declared tools were not checked against the permissions before the run (it was loaded meanwhile); call it again", ErrUnavailable, def.Name))
	}
	return e.runs.Start(ctx, def.Name, execute.Program{Module: entry.Code, Export: tl.ExportFor(entry.Code, entry.FQDN, fn), Args: args})
}
