package sandbox

import (
	"context"
	"fmt"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/internal/toolbox"
)

// Runner starts code in a Deno container and drives it for the call c
// of outer: its mcp.* calls come back through the request path
// (coderun.Runs).
type Runner interface {
	Start(ctx context.Context, c *call.Call, outer string, prog execute.Program) call.Result
}

// Capabilities gives the code of the deno capabilities pml added (the
// registry side holds it).
type Capabilities interface {
	// Program is the program that runs tool (ns:function) with args, and
	// what its capability declares it calls; ok is false when the
	// capability's code is not loaded.
	Program(tool string, args map[string]any) (prog execute.Program, declared []string, ok bool)
}

// DenoExec runs the exported functions of deno capabilities (pml add):
// the code fetched from the registry, held by caps.
type DenoExec struct {
	caps Capabilities
	runs Runner
}

// NewDenoExec is the deno capabilities' executor.
func NewDenoExec(caps Capabilities, runs Runner) DenoExec { return DenoExec{caps: caps, runs: runs} }

// Run runs one exported function of a deno capability in a Deno
// container, like the cloud's execute_locally code: its mcp.* calls come
// back through the request path.
func (e DenoExec) Run(ctx context.Context, c *call.Call, def toolbox.Tool, args map[string]any) call.Result {
	prog, declared, ok := e.caps.Program(def.Name, args)
	if !ok {
		return call.ResultFor(fmt.Errorf("%w %q: its capability's code is not loaded", call.ErrNotFound, def.Name))
	}
	// Its declared tools were checked on the way here (layer_declared.go),
	// unless the capability was loaded since: then it does not run
	// unchecked.
	if len(declared) > 0 && c.UpFrontFor(def.Name) == nil {
		return call.ResultFor(fmt.Errorf("%w: %s was not run: its capability's declared tools were not checked against the permissions before the run (it was loaded meanwhile); call it again", call.ErrUnavailable, def.Name))
	}
	return e.runs.Start(ctx, c, def.Name, prog)
}
