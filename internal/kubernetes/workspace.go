package kubernetes

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// volumeSource turns a mount source (a path as pml sees it) into the
// volume a pod mounts, and the subPath in it.
type volumeSource interface {
	volumeFor(source string) (corev1.VolumeSource, string, error)
	// describe says how the workspace reaches pods (pml doctor).
	describe() string
}

// hostPaths is the mode of a pml running on a node of the cluster (a CI
// job, a single-node cluster): pods are pinned to that node and mount
// the paths themselves, with the read-only / read-write rules of the
// mounts.
type hostPaths struct{ node string }

func (h hostPaths) volumeFor(source string) (corev1.VolumeSource, string, error) {
	fi, err := os.Stat(source)
	if err != nil {
		return corev1.VolumeSource{}, "", fmt.Errorf("mount source %s: %w", source, err)
	}
	// The type makes the kubelet check what it mounts, and never create
	// a missing path on the node.
	t := corev1.HostPathDirectory
	if !fi.IsDir() {
		t = corev1.HostPathFile
	}
	return corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: source, Type: &t}}, "", nil
}

func (h hostPaths) describe() string {
	return fmt.Sprintf("hostPath on node %s (pml runs on that node; pods are pinned to it)", h.node)
}

// claimMount is a volume of pml's own pod that is a PersistentVolumeClaim.
type claimMount struct {
	claim     string
	readOnly  bool
	mountPath string // where pml's pod sees it
	subPath   string // the subPath pml's pod mounts it with, if any
}

// claims is the mode of a pml running in a pod whose workspace is on a
// PersistentVolumeClaim: pods mount the same claim, with a subPath for
// the part of it a mount names.
type claims struct{ mounts []claimMount }

func (c claims) volumeFor(source string) (corev1.VolumeSource, string, error) {
	var best *claimMount
	for i, m := range c.mounts {
		if within(source, m.mountPath) && (best == nil || len(m.mountPath) > len(best.mountPath)) {
			best = &c.mounts[i]
		}
	}
	if best == nil {
		return corev1.VolumeSource{}, "", fmt.Errorf("%s is not on a PersistentVolumeClaim of pml's pod, so a tool pod cannot mount it; put the workspace (and pml's executable, for shell:exec) on a claim the pod mounts", source)
	}
	rel, _ := filepath.Rel(best.mountPath, source)
	sub := filepath.ToSlash(filepath.Join(best.subPath, rel))
	if sub == "." {
		sub = ""
	}
	return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: best.claim, ReadOnly: best.readOnly}}, sub, nil
}

func (c claims) describe() string {
	var names []string
	for _, m := range c.mounts {
		names = append(names, fmt.Sprintf("claim %s at %s", m.claim, m.mountPath))
	}
	return "PersistentVolumeClaim with subPath (" + strings.Join(names, ", ") + ")"
}

func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// inCluster reports whether pml runs in a pod (the API server's service
// is in its environment).
func inCluster() bool {
	return os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != ""
}

// ownPodClaims finds pml's own pod (its name is the host name unless
// POD_NAME says otherwise) and the claims it mounts, in namespace ns.
func ownPodClaims(ctx context.Context, a api) (claims, error) {
	name := os.Getenv("POD_NAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	p, err := a.getPod(ctx, name)
	if err != nil {
		return claims{}, fmt.Errorf("finding pml's own pod %s (set POD_NAME from the downward API if its name is not the host name): %w", name, err)
	}
	return claimsOf(p), nil
}

// claimsOf lists the claims pod p's containers mount. Which container is
// pml's cannot be told from inside; a mount path shared by two
// containers with different claims would be ambiguous, so the first
// container that mounts a path wins (pml's is normally the only one).
func claimsOf(p *corev1.Pod) claims {
	vols := map[string]*corev1.PersistentVolumeClaimVolumeSource{}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			vols[v.Name] = v.PersistentVolumeClaim
		}
	}
	var out claims
	seen := map[string]bool{}
	for _, c := range p.Spec.Containers {
		for _, m := range c.VolumeMounts {
			pvc, ok := vols[m.Name]
			if !ok || seen[m.MountPath] {
				continue
			}
			seen[m.MountPath] = true
			out.mounts = append(out.mounts, claimMount{claim: pvc.ClaimName, readOnly: pvc.ReadOnly || m.ReadOnly, mountPath: filepath.Clean(m.MountPath), subPath: m.SubPath})
		}
	}
	return out
}

// findNode finds the node pml runs on: PML_KUBERNETES_NODE, else the node
// whose name or hostname label is this host's name, else the node whose
// address is one of this machine's. A node elsewhere is never guessed:
// its hostPath would be another machine's files.
func findNode(ctx context.Context, a api) (string, error) {
	if n := os.Getenv(NodeEnv); n != "" {
		return n, nil
	}
	nodes, err := a.listNodes(ctx)
	if err != nil {
		return "", fmt.Errorf("listing the cluster's nodes to find the one pml runs on (or set %s): %w", NodeEnv, err)
	}
	name := func(n corev1.Node) string {
		if h := n.Labels["kubernetes.io/hostname"]; h != "" {
			return h
		}
		return n.Name
	}
	host, _ := os.Hostname()
	for _, n := range nodes.Items {
		if n.Name == host || n.Labels["kubernetes.io/hostname"] == host {
			return name(n), nil
		}
	}
	local := localAddrs()
	for _, n := range nodes.Items {
		for _, addr := range n.Status.Addresses {
			if addr.Type == corev1.NodeInternalIP && local[addr.Address] {
				return name(n), nil
			}
		}
	}
	return "", fmt.Errorf("pml does not run on a node of this cluster (no node is named %q or has one of this machine's addresses), so the workspace cannot be mounted from this machine: run pml on a node (or set %s to its name) or in a pod whose workspace is a PersistentVolumeClaim", host, NodeEnv)
}

// localAddrs are this machine's IP addresses.
func localAddrs() map[string]bool {
	out := map[string]bool{}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() {
			out[ipn.IP.String()] = true
		}
	}
	return out
}
