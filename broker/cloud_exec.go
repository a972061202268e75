package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/cloud"
	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/toolbox"
)

// cloudExec runs the tools the PML cloud serves (its list, registry http
// entries): each call forwarded with the person's own API keys (BYOK).
// pml:execute may answer with code, run here in a Deno container
// (runs).
type cloudExec struct {
	sb    *sandbox
	cloud *cloudSide
	runs  *codeRuns
}

// run forwards an allowed call with its BYOK keys.
func (e cloudExec) Run(ctx context.Context, c *Call, def toolbox.Tool, args map[string]any) Result {
	cl := e.cloud.client
	if !cl.Enabled() {
		return errorResult(fmt.Errorf("%w: Cloud mode requires PML_API_KEY: %s runs in the PML cloud. Get a key at %s/settings and run pml init --api-key KEY (it goes to your user credentials file, not into the project), or set PML_API_KEY in pml's environment; local tools work without it", ErrCloud, def.Name, cl.URL))
	}
	if g, ok := e.cloud.regGrantOf(def.Name); ok && !e.sb.grants.granted(g) {
		// The approve layer asks first; this is the last guard before a
		// registry's choice of variables leaves the machine.
		return errorResult(fmt.Errorf("%w: %s comes from a registry entry whose calls would send %s, which you have not granted; nothing was sent. Call it again to be asked, or add it with `pml add`, which shows it",
			ErrRefused, def.Name, shownGrant(g)))
	}
	keys, missing := byokFor(e.sb, e.cloud, def.Name)
	if len(missing) > 0 {
		return errorResult(fmt.Errorf("%w: %s needs %s, which is not set: %s", ErrCloud, def.Name, strings.Join(missing, ", "), whereToSet(e.sb.ws)))
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
			return errorResult(fmt.Errorf("%s was cancelled", def.Name))
		case errors.As(err, &re):
			return errorResult(fmt.Errorf("%s: %s", def.Name, re.Message))
		}
		return errorResult(fmt.Errorf("%w: %s: %w", ErrCloud, def.Name, err))
	}
	// Only the planner may hand code back: a search result or a fetched
	// page that happens to read {"status": "execute_locally"} is data.
	if payload, ok := cloud.ExecuteLocally(res); ok && def.Name == ExecuteTool {
		// Never on the host: in a Deno container whose mcp.* calls come
		// back through the broker.
		return e.executeLocally(ctx, c, def.Name, payload)
	}
	return Result{Text: joinText(res), Structured: res.StructuredContent, IsError: res.IsError, Upstream: res}
}

func whereToSet(ws string) string {
	return fmt.Sprintf("add it to %s or to the env of the pml entry in your MCP client's configuration (e.g. .mcp.json)", filepath.Join(ws, ".env"))
}

// executeLocally runs the code of an execute_locally answer.
func (e cloudExec) executeLocally(ctx context.Context, c *Call, outer string, payload map[string]any) Result {
	code, _ := payload["code"].(string)
	if strings.TrimSpace(code) == "" {
		return errorResult(fmt.Errorf("%w: %s: the cloud asked to execute code locally but sent no code", ErrCloud, outer))
	}
	tools, err := declaredOfPayload(payload)
	if err != nil {
		return errorResult(fmt.Errorf("%w: %s: the cloud asked to execute code locally, but %v; nothing ran", ErrCloud, outer, err))
	}
	if len(tools) > 0 {
		// Decided before the Deno container starts, as a registry
		// capability's declaration is (layer_declared.go): one denied
		// and nothing runs.
		d := &call.Declared{Capability: outer, Tools: tools}
		for _, t := range tools {
			switch dec, pat := e.cloud.decide(t); dec {
			case Deny:
				src := e.cloud.permSource()
				res := errorResult(fmt.Errorf("%w: %s was not run: the code the cloud sent declares it calls %s (tools_used), which matches the deny pattern %q in %s; nothing ran. "+
					"Remove the pattern from permissions.deny there to run it, or ask for a task that does not call %s", ErrDenied, outer, t, pat, src, t))
				res.Refusal = &call.Refusal{Pattern: pat, Reason: fmt.Sprintf("the code the cloud sent declares %s, which matches the deny pattern %q from %s", t, pat, src)}
				return res
			case Ask:
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
			return Result{UpFront: d}
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
	sb.guard.Verify(".env")
	dotenv, err := readDotEnv(sb.ws)
	if err != nil {
		// The keys it would hold are reported missing; this says why.
		sb.log.Error().Err(err).Str("tool", tool).Msg("the workspace's .env is not read")
	}
	vals := map[string]string{}
	var missing []string
	for _, n := range names {
		if ownVariable(n) {
			sb.log.Warn().Str("tool", tool).Str("variable", n).Msg("a tool asked for one of pml's own variables; it is never sent")
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
