package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/cloud"
	"github.com/pml-dev/pml/internal/execute"
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
func (e cloudExec) Run(ctx context.Context, def toolbox.Tool, args map[string]any) Result {
	c := e.cloud.client
	if !c.Enabled() {
		return errorResult(fmt.Errorf("%w: Cloud mode requires PML_API_KEY: %s runs in the PML cloud. Get a key at %s/settings and run pml init --api-key KEY (it goes to your user credentials file, not into the project), or set PML_API_KEY in pml's environment; local tools work without it", ErrCloud, def.Name, c.URL))
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
	res, err := c.CallTool(ctx, def.Name, args, keys)
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
		return e.executeLocally(ctx, def.Name, payload)
	}
	return Result{Text: joinText(res), Structured: res.StructuredContent, IsError: res.IsError, Upstream: res}
}

func whereToSet(ws string) string {
	return fmt.Sprintf("add it to %s or to the env of the pml entry in your MCP client's configuration (e.g. .mcp.json)", filepath.Join(ws, ".env"))
}

// executeLocally runs the code of an execute_locally answer.
func (e cloudExec) executeLocally(ctx context.Context, outer string, payload map[string]any) Result {
	code, _ := payload["code"].(string)
	if strings.TrimSpace(code) == "" {
		return errorResult(fmt.Errorf("%w: %s: the cloud asked to execute code locally but sent no code", ErrCloud, outer))
	}
	return e.runs.Start(ctx, outer, execute.Program{Code: code})
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
