package doctor

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/internal/egress"
	"github.com/pml-dev/pml/internal/inside"
	"github.com/pml-dev/pml/internal/shim"
)

// checkEgress says which path egress takes here (internal/egress) and
// who was given network.
func checkEgress(cfg *config.Config, info container.Info, scope egressFacts) Check {
	var given []string
	if cfg != nil {
		if !cfg.Sandbox.Network.Empty() {
			given = append(given, "shell:exec")
		}
		for name, s := range cfg.Servers {
			if !s.Network.Empty() {
				given = append(given, name)
			}
		}
	}
	sort.Strings(given)
	who := "nothing is given network (mcps.NAME.network, sandbox.network)"
	if len(given) > 0 {
		who = "given network: " + strings.Join(given, ", ")
	}
	path, why := egress.PathFor(info.Remote || scope.notHere, scope.programErr)
	if path == egress.PathUnixSocket {
		return Check{"ok", "egress", fmt.Sprintf("path: %s (%s); %s", path, why, who), ""}
	}
	if path == egress.PathContainer {
		where := ""
		if scope.how != "" {
			where = " (" + scope.how + ")"
		}
		// Installs still reach their registry only through pml's own
		// proxy (broker/server_install.go refuses them here).
		return Check{"ok", "egress", fmt.Sprintf("path: %s: %s%s; server installs that fetch packages (npm, pip) are refused on such an engine: install where the engine is local and carry the image over (pml images save, pml images load); %s", path, why, where, who), ""}
	}
	status := "warn"
	if len(given) > 0 {
		status = "fail"
	}
	// The fix for the cause: a pml without its in-container program gets
	// one; an engine on another machine (or in a VM) is the other cause.
	fix := "run pml on the Docker host itself"
	if scope.programErr != nil {
		fix = "use a pml that carries its in-container program: reinstall a release (docs/install.md), or `make build` in pml's source tree"
	}
	installs := "server installs that fetch packages (npm, pip) are refused, since they reach their registry only through that proxy: install where the engine is local and carry the image over (pml images save, pml images load)"
	if scope.programErr != nil && !scope.notHere {
		installs = "server installs that fetch packages cannot reach their registry either"
	}
	where := ""
	if scope.how != "" {
		where = " (" + scope.how + ")"
	}
	return Check{status, "egress", fmt.Sprintf("path: %s: %s%s; servers and shell:exec given network run WITHOUT it (each such call says so, and its audit entry), and %s; %s", path, why, where, installs, who), fix}
}

// egressFacts is what decides the egress path besides the daemon's info:
// whether the engine is off this machine (a VM: a unix socket does not
// cross into it) and whether pml's in-container program runs there.
type egressFacts struct {
	notHere    bool
	how        string
	programErr error
}

// egressScope finds out (internal/docker/proof.go), not guesses from the
// socket's name, whether the engine can reach pml's sockets.
func egressScope(ctx context.Context, rt *docker.Runtime) egressFacts {
	shares, how, err := rt.SharesHost(ctx, "")
	if err != nil {
		how = "not proven: " + err.Error()
	}
	f := egressFacts{notHere: !shares || runtime.GOOS != "linux", how: how}
	p, err := inside.NewSource(rt).Program(ctx)
	if err == nil {
		err = shim.CheckBinary(p.Path, p.Arch)
	}
	f.programErr = err
	return f
}
