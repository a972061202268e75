package egress

import "fmt"

// Path is how a container's connections reach pml's egress proxy.
type Path string

const (
	// PathUnixSocket: the proxy listens on a unix socket on this machine,
	// bind-mounted read-only into the container beside the shim; the
	// container has only lo. It needs a daemon that shares this
	// machine's filesystem and a pml that runs in a container (static
	// Linux).
	PathUnixSocket Path = "unix-socket"
	// PathContainer: the engine is not on this machine (a VM, another
	// host), so pml runs its egress container there (internal/egress/box):
	// the same proxy and rules, each container given network on an
	// internal network of its own with that container only.
	PathContainer Path = "egress-container"
	// PathNone: no path works here; a server or shell:exec given network
	// runs without it (fail closed), and installs fall back to the
	// engine's bridge network.
	PathNone Path = "none"
)

// PathFor says which path works for a daemon (remote: it does not share
// this machine's filesystem, as Docker Desktop's VM or a DOCKER_HOST over
// TCP) and a pml executable (staticErr: why it cannot run in a
// container, nil when it can), and why.
//
// An engine elsewhere gets PathContainer: the egress container runs
// pml's in-container program, so it too needs that program.
func PathFor(remote bool, staticErr error) (Path, string) {
	switch {
	case staticErr != nil:
		return PathNone, fmt.Sprintf("pml's in-container listener cannot run in containers: %v", staticErr)
	case remote:
		return PathContainer, "the container engine is not on this machine (a VM or another host), so pml runs its egress container there: the same proxy and rules, each container given network on an internal network of its own with that container only; connections, refusals (approvals) and rule changes cross its attach stream"
	}
	return PathUnixSocket, "pml's proxy runs on this machine; each container reaches it over a unix socket mounted read-only at /.pml/egress, and keeps only lo"
}
