package doctor

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/policies"
)

// checkRuntimes lists the engine's OCI runtimes and the one each kind of
// pml container runs on (sandbox.runtime, a server's own): a runtime asked
// for by name that the engine lacks fails, with how to add it.
func checkRuntimes(cfg *config.Config, info container.Info) Check {
	const name = "runtimes"
	project := config.SandboxRuntimeDefault
	var servers []string
	if cfg != nil {
		project = cfg.Sandbox.Runtime
		for _, n := range slices.Sorted(maps.Keys(cfg.Servers)) {
			if r := cfg.Servers[n].Runtime; r != "" && r != project {
				servers = append(servers, n)
			}
		}
	}
	if len(info.Runtimes) == 0 {
		return Check{"ok", name, fmt.Sprintf("the engine does not list its runtimes; sandbox.runtime is %q", project), ""}
	}
	has := func(r string) bool { return slices.Contains(info.Runtimes, r) }
	// settle is what a container asking for r runs on, as the broker
	// settles it (container.RuntimeChooser).
	settle := func(r string) (string, bool) {
		switch r {
		case "", config.SandboxRuntimeDefault:
			return info.DefaultRuntime + " (the engine's default)", true
		case config.SandboxRuntimeAuto:
			if has(policies.RuntimeGVisor) {
				return "runsc (gVisor; auto)", true
			}
			return info.DefaultRuntime + " (auto: the engine has no runsc)", true
		}
		return r, has(r)
	}
	var uses []string
	var missing []string
	onGVisor := false
	settleUse := func(r string) (string, bool) {
		s, ok := settle(r)
		onGVisor = onGVisor || (ok && strings.HasPrefix(s, policies.RuntimeGVisor))
		return s, ok
	}
	rt, ok := settleUse(project)
	if !ok {
		missing = append(missing, project)
	}
	uses = append(uses, "toolbox, shell:exec, Deno runs, servers and their installs: "+rt)
	for _, n := range servers {
		r := cfg.Servers[n].Runtime
		s, ok := settleUse(r)
		if !ok && !slices.Contains(missing, r) {
			missing = append(missing, r)
		}
		uses = append(uses, fmt.Sprintf("server %s: %s", n, s))
	}
	detail := fmt.Sprintf("the engine has %s (default %s); %s", strings.Join(info.Runtimes, ", "), info.DefaultRuntime, strings.Join(uses, "; "))
	if len(missing) > 0 {
		return Check{"fail", name, fmt.Sprintf("%s; but the engine has no runtime %q", detail, missing[0]), container.RuntimeFix(missing[0])}
	}
	// gVisor forbids connecting to the host's unix sockets unless told:
	// pml's egress proxy and pooled servers' direct stdio are such
	// sockets, mounted into the container.
	if onGVisor && !hostUDS(info.RuntimeArgs[policies.RuntimeGVisor]) {
		return Check{"warn", name, detail + "; but runsc is registered without --host-uds=open: under it, servers and shell:exec given network get none",
			`add "--host-uds=open" to runsc's runtimeArgs in /etc/docker/daemon.json and send dockerd a SIGHUP (docs/gvisor.md)`}
	}
	return Check{"ok", name, detail, ""}
}

// hostUDS: runsc's arguments let a container connect to a host socket
// mounted into it.
func hostUDS(args []string) bool {
	for _, a := range args {
		switch strings.TrimLeft(a, "-") {
		case "host-uds=open", "host-uds=all", "fsgofer-host-uds":
			return true
		}
	}
	return false
}
