package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/internal/engine"
)

// checkEngine is pml doctor's engine section: which endpoint pml uses and
// how it was chosen, whether the engine answers, and which host paths it
// can mount (a daemon in a VM or on another host sees only some, or
// none). ok is false when the engine cannot be used: the checks after it
// need a daemon. The caller closes rt.
func checkEngine(ctx context.Context, host string, cfg *config.Config, ws string, add func(Check)) (rt *docker.Runtime, info container.Info, ok bool) {
	var shared []string
	if cfg != nil {
		shared = cfg.Sandbox.SharedPaths
	}
	rt, err := docker.OpenHost(host, docker.Options{SharedPaths: shared})
	if err != nil {
		fix := "pass --host unix:///path/to/docker.sock, or set DOCKER_HOST"
		if errors.Is(err, engine.ErrConfig) {
			fix = "fix the Docker configuration as the message says (docker context ls; docker context use NAME), or pass --host"
		}
		add(Check{"fail", "endpoint", err.Error(), fix})
		return nil, info, false
	}
	ep := rt.Endpoint()
	add(Check{"ok", "endpoint", ep.Host + ", " + ep.How(), ""})
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err = rt.Info(ictx)
	if err != nil {
		fix := engineFix(ep)
		if docker.SocketDenied(err) {
			fix = "join the socket's group and log in again, or use a rootless engine (the message says how)"
		}
		add(Check{"fail", "docker", err.Error(), fix})
		rt.Close()
		return nil, info, false
	}
	add(Check{"ok", "docker", fmt.Sprintf("Engine %s at %s, API %s", info.ServerVersion, info.Endpoint, info.APIVersion), ""})
	scope, err := rt.Scope(ictx)
	if err != nil {
		add(Check{"warn", "mounts", "cannot tell which paths the engine can mount: " + err.Error(), ""})
		return rt, info, true
	}
	add(checkMounts(scope, ws))
	if len(scope.Unseen) > 0 {
		// A listed share the engine was proven not to see: a workspace
		// under it is refused, and the fix is the engine's, not pml's.
		add(Check{"warn", "shared paths", fmt.Sprintf("%s lists %s, but a container of the engine did not see the marker pml wrote there: workspaces under it are refused", engine.SharedPathsKey, strings.Join(scope.Unseen, ", ")),
			"share " + strings.Join(scope.Unseen, ", ") + " with the engine (its file-sharing setting: Docker Desktop's Settings > Resources > File sharing, Colima's or Lima's mounts) and restart it, or remove it from " + engine.SharedPathsKey})
	}
	return rt, info, true
}

// checkMounts says which paths the engine can mount, and fails when the
// workspace is not among them: every call would be refused.
func checkMounts(s engine.Scope, ws string) Check {
	const name = "mounts"
	if s.Local {
		return Check{"ok", name, s.Describe(), ""}
	}
	if err := s.Check(ws); err != nil {
		var ns *engine.NotSharedError
		if errors.As(err, &ns) && ns.Unseen != "" {
			return Check{"fail", name, s.Describe() + "; the workspace " + ws + " is under " + ns.Unseen + ", which the engine does not see, so pml refuses to start containers for it (they would see the engine's own directory of that name)",
				"share " + ns.Unseen + " with the engine (its file-sharing setting) and restart it, or move the workspace under a shared path"}
		}
		return Check{"fail", name, s.Describe() + "; the workspace " + ws + " is not among them, so pml refuses to start containers for it (they would see an empty directory)",
			"move the workspace under a shared path, or " + s.Advice}
	}
	return Check{"ok", name, s.Describe() + "; the workspace " + ws + " is among them", ""}
}

// engineFix is what to do when the engine at ep does not answer.
func engineFix(ep engine.Endpoint) string {
	switch ep.Source {
	case engine.FromFlag:
		return "start the engine at " + ep.Host + ", or pass another --host"
	case engine.FromDockerHost:
		return "start the engine at " + ep.Host + ", or unset DOCKER_HOST"
	case engine.FromEnvContext, engine.FromConfig:
		return fmt.Sprintf("start the engine of Docker context %q, or choose another (docker context ls; docker context use NAME)", ep.Context)
	}
	return "start the daemon (Docker Desktop, Colima, OrbStack, or: sudo systemctl start docker), or name it with --host, DOCKER_HOST or docker context use"
}
