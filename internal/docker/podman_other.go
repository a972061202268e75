//go:build !linux

package docker

// localRootless: off Linux, Podman runs in a VM (podman machine) whose
// socket is forwarded; only its own info says whether it is rootless.
func localRootless(string) (rootless, ok bool) { return false, false }

// hostCgroupVersion: the host's cgroups are not the engine's off Linux.
func hostCgroupVersion() (string, bool) { return "", false }
