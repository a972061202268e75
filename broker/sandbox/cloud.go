package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/cloud"
	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/toolbox"
)

// CloudTools is what a call of a cloud tool needs of the cloud side
// (broker's).
type CloudTools interface {
	// Client is the PML cloud's client in force.
	Client() *cloud.Client
	// Keys are the values of the variables tool sends with its calls
	// (BYOK), or why nothing may be sent: a registry entry's variables
	// the person has not granted, a key that is not set.
	Keys(tool string) (map[string]string, error)
	// Decide and PermissionSource are the permissions' (the tools an
	// execute_locally answer declares are decided with them before its
	// code runs).
	Decide(tool string) (call.Decision, string)
	PermissionSource() string
}

// ExecuteTool is the cloud's planner: the one tool whose answer may be
// code to run here.
const ExecuteTool = "pml:execute"

// CloudExec runs the tools the PML cloud serves (its list, registry http
// entries): each call forwarded with the person's own API keys (BYOK).
// pml:execute may answer with code, run here in a Deno container
// (runs).
type CloudExec struct {
	cloud CloudTools
	runs  Runner
}

// NewCloudExec is the cloud tools' executor.
func NewCloudExec(cloud CloudTools, runs Runner) CloudExec {
	return CloudExec{cloud: cloud, runs: runs}
}

// Run forwards an allowed call with its BYOK keys. c may be nil for a
// call that is refused before anything runs (local mode).
func (e CloudExec) Run(ctx context.Context, c *call.Call, def toolbox.Tool, args map[string]any) call.Result {
	cl := e.cloud.Client()
	if !cl.Enabled() {
		return call.ResultFor(fmt.Errorf("%w: Cloud mode requires PML_API_KEY: %s runs in the PML cloud. Get a key at %s/settings and run pml init --api-key KEY (it goes to your user credentials file, not into the project), or set PML_API_KEY in pml's environment; local tools work without it", call.ErrCloud, def.Name, cl.URL))
	}
	keys, err := e.cloud.Keys(def.Name)
	if err != nil {
		return call.ResultFor(err)
	}
	if d := c.UpFrontFor(def.Name); d != nil && d.WorkflowID != "" && d.Held != nil && def.Name == ExecuteTool {
		// The person approved the declared tools of this code: it runs,
		// and the cloud is not asked again (for other code).
		return e.executeLocally(ctx, c, def.Name, d.Held)
	}
	res, err := cl.CallTool(ctx, def.Name, args, keys)
	if err != nil {
		var re *cloud.RemoteError
		switch {
		case errors.Is(err, context.Canceled):
			return call.ResultFor(fmt.Errorf("%s was cancelled", def.Name))
		case errors.As(err, &re):
			return call.ResultFor(fmt.Errorf("%s: %s", def.Name, re.Message))
		}
		return call.ResultFor(fmt.Errorf("%w: %s: %w", call.ErrCloud, def.Name, err))
	}
	// Only the planner may hand code back: a search result or a fetched
	// page that happens to read {"status": "execute_locally"} is data.
	if payload, ok := cloud.ExecuteLocally(res); ok && def.Name == ExecuteTool {
		// Never on the host: in a Deno container whose mcp.* calls come
		// back through the broker.
		return e.executeLocally(ctx, c, def.Name, payload)
	}
	return call.Result{Text: joinText(res), Structured: res.StructuredContent, IsError: res.IsError, Upstream: res}
}

// executeLocally runs the code of an execute_locally answer.
func (e CloudExec) executeLocally(ctx context.Context, c *call.Call, outer string, payload map[string]any) call.Result {
	code, _ := payload["code"].(string)
	if strings.TrimSpace(code) == "" {
		return call.ResultFor(fmt.Errorf("%w: %s: the cloud asked to execute code locally but sent no code", call.ErrCloud, outer))
	}
	tools, err := declaredOfPayload(payload)
	if err != nil {
		return call.ResultFor(fmt.Errorf("%w: %s: the cloud asked to execute code locally, but %v; nothing ran", call.ErrCloud, outer, err))
	}
	if len(tools) > 0 {
		// Decided before the Deno container starts, as a registry
		// capability's declaration is (layer_declared.go): one denied
		// and nothing runs.
		d := &call.Declared{Capability: outer, Tools: tools}
		for _, t := range tools {
			switch dec, pat := e.cloud.Decide(t); dec {
			case call.Deny:
				src := e.cloud.PermissionSource()
				res := call.ResultFor(fmt.Errorf("%w: %s was not run: the code the cloud sent declares it calls %s (tools_used), which matches the deny pattern %q in %s; nothing ran. "+
					"Remove the pattern from permissions.deny there to run it, or ask for a task that does not call %s", call.ErrDenied, outer, t, pat, src, t))
				res.Refusal = &call.Refusal{Pattern: pat, Reason: fmt.Sprintf("the code the cloud sent declares %s, which matches the deny pattern %q from %s", t, pat, src)}
				return res
			case call.Ask:
				d.Asked = append(d.Asked, t)
			}
		}
		if up := c.UpFrontFor(outer); up != nil && up.WorkflowID != "" {
			// Approved (the held answer, Run): the run starts with them.
			return e.runs.Start(ctx, c, outer, execute.Program{Code: code})
		}
		if len(d.Asked) > 0 {
			// Put to the person once before anything runs; the answer
			// starts this code (Run, d.Held).
			d.Held = payload
			return call.Result{UpFront: d}
		}
		// Nothing asks: a call the code did not declare is flagged in
		// the audit (layer_audit.go).
		c.UpFront = d
	}
	return e.runs.Start(ctx, c, outer, execute.Program{Code: code})
}

// declaredOfPayload is what an execute_locally answer declares its code
// calls: "tools_used" and "client_tools" (seed 003; their camelCase
// spellings too), each once, in the order given. Each must name a tool
// (namespace:action), never a pattern, as a registry entry's declaration
// (internal/registry, ValidDeclared): a pattern would hide from the audit
// the calls the code makes without declaring them.
func declaredOfPayload(payload map[string]any) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, key := range []string{"tools_used", "toolsUsed", "client_tools", "clientTools"} {
		v, ok := payload[key]
		if !ok || v == nil {
			continue
		}
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("its %q is not a list of tool names", key)
		}
		for _, x := range list {
			t, ok := x.(string)
			if !ok || !registry.ValidDeclared(t) {
				return nil, fmt.Errorf("its %q names tools as namespace:action (filesystem:read_file), never patterns; %s is not one", key, termsafe.Quote(fmt.Sprint(x), 80))
			}
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	if len(out) > registry.MaxDeclared {
		return nil, fmt.Errorf("it declares %d tools in \"tools_used\" and \"client_tools\"; at most %d", len(out), registry.MaxDeclared)
	}
	return out, nil
}
