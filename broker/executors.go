package broker

import (
	"os"
	"sort"

	sbx "github.com/pml-dev/pml/broker/sandbox"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/inside"
	"github.com/pml-dev/pml/policies"
)

// The executors live in package sandbox; what they need of the sources
// (a server, the cloud side, the deno capabilities' code) they reach
// through the small interfaces it declares, which the adapters of
// sources.go implement.

// sandbox is package sandbox's Sandbox with the registry grants
// (registry_grant.go) a registry server's start is checked against.
type sandbox struct {
	*sbx.Sandbox
	grants *tl.Grants
}

// byokFor reads the variables a cloud tool declares from pml's environment,
// else the workspace's .env. It returns the values and the missing names.
func byokFor(sb *sandbox, c *tl.Cloud, tool string) (map[string]string, []string) {
	return byokValues(sb, tool, c.KeyNames(tool))
}

// byokValues reads names for tool (byokFor).
func byokValues(sb *sandbox, tool string, names []string) (map[string]string, []string) {
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
