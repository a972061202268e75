package doctor

import (
	"fmt"

	"github.com/pml-dev/pml/internal/container"
)

// checkEngineLimits says what the engine is (rootless Podman maps the
// user's uid with keep-id) and whether it enforces the policy's memory,
// CPU and pids limits: rootless engines on cgroup v1 ignore them, and pml
// never claims limits it lacks.
func checkEngineLimits(info container.Info) []Check {
	var out []Check
	if info.UsernsMode == "keep-id" {
		out = append(out, Check{"ok", "user namespace", fmt.Sprintf("%s: containers get Podman's keep-id user namespace, so files tools write in the workspace belong to you; their other uids stay in your subordinate range (never root on the host)", info.Engine), ""})
	}
	note := info.LimitsNote()
	if note == "" {
		out = append(out, Check{"ok", "limits", fmt.Sprintf("%s enforces the memory, CPU and pids limits of the policy", engineName(info)), ""})
		return out
	}
	fix := "use an engine that enforces them: on cgroup v2 (systemd.unified_cgroup_hierarchy=1 on the kernel command line) with the cpu, memory and pids controllers delegated to your user, or rootful Docker"
	out = append(out, Check{"warn", "limits", "resource limits " + note + ": a tool can use all the memory, CPU and processes your user may; network none, read-only root, no capabilities, no-new-privileges, seccomp, the non-root user and pml's own deadline still hold", fix})
	return out
}

func engineName(info container.Info) string {
	if info.Engine != "" {
		return info.Engine
	}
	return "the engine"
}
