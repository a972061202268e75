package doctor

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/inside"
	"github.com/pml-dev/pml/internal/kubernetes"
)

// doctorKubernetes checks what the kubernetes runtime needs: the cluster
// answers, how the workspace reaches pods, that pml's pods have no
// network (the verified NetworkPolicy), and the images.
func doctorKubernetes(ctx context.Context, ws string, cfg *config.Config) []Check {
	var out []Check
	add := func(c Check) { out = append(out, c) }
	rt, err := kubernetes.New(kubernetes.Options{Namespace: cfg.Kubernetes.Namespace, ProbeImage: cfg.Sandbox.ShellImage,
		AllowUnverifiedNetwork: cfg.Kubernetes.UnverifiedNetwork, Logger: zerolog.Nop()})
	if err != nil {
		add(Check{"fail", "kubernetes", err.Error(), "set KUBECONFIG to the cluster's kubeconfig"})
		return out
	}
	ictx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	info, err := rt.Info(ictx)
	if err != nil {
		add(Check{"fail", "kubernetes", err.Error(), "check KUBECONFIG and that the cluster runs (kubectl get nodes)"})
		return out
	}
	add(Check{"ok", "kubernetes", fmt.Sprintf("cluster %s at %s", info.ServerVersion, info.Endpoint), ""})
	if how, err := rt.Workspace(ictx); err != nil {
		add(Check{"fail", "workspace mount", err.Error(), "run pml on a node of the cluster (or set " + kubernetes.NodeEnv + "), or in a pod whose workspace is a PersistentVolumeClaim"})
	} else {
		add(Check{"ok", "workspace mount", ws + " reaches pods as " + how, ""})
	}
	// The probe pods take a few seconds the first time; the verdict is
	// cached, so a pml started next uses it.
	vctx, vcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer vcancel()
	v, err := rt.NetworkVerdict(vctx, false)
	switch {
	case err != nil:
		add(Check{"fail", "network isolation", err.Error(), "see \"What the cluster must have\" in https://github.com/pml-dev/pml/blob/main/docs/kubernetes.md"})
	case v.Enforced:
		add(Check{"ok", "network isolation", "NetworkPolicy " + kubernetes.PolicyName + " in namespace " + rt.Namespace() + " is enforced: " + v.Detail + " (checked " + v.Checked.Format(time.RFC3339) + ")", ""})
	case cfg.Kubernetes.UnverifiedNetwork:
		add(Check{"warn", "network isolation", "NOT verified (" + v.Detail + "); tools run anyway because kubernetes.unverified_network is set, and every pod is logged as unverified", "use a network plugin that enforces NetworkPolicy and unset the opt-out"})
	default:
		add(Check{"fail", "network isolation", "NOT verified, so no tool runs: " + v.Detail, "use a network plugin that enforces NetworkPolicy (Calico, Cilium, kube-router, ...)"})
	}
	add(Check{"ok", "limits", "pods get runAsNonRoot as the workspace owner, a read-only root, no privilege escalation, capabilities dropped, seccomp RuntimeDefault, no service-account token, CPU/memory/ephemeral-storage limits and a deadline; the process count is bounded by the node's kubelet (podPidsLimit), not per pod", ""})
	tb := &images.Toolbox{Runtime: rt, Program: inside.NewSource(rt).Program}
	for _, img := range []struct{ name, ref string }{{"toolbox image", ""}, {"shell image", cfg.Sandbox.ShellImage}} {
		ref := img.ref
		if ref == "" {
			if ref, err = tb.Ref(ictx); err != nil {
				add(Check{"fail", img.name, err.Error(), ""})
				continue
			}
		}
		ok, err := rt.ImageExists(ictx, ref)
		switch {
		case err != nil:
			add(Check{"fail", img.name, err.Error(), ""})
		case ok:
			add(Check{"ok", img.name, ref + " is on a node of the cluster (or pulled by it)", ""})
		default:
			add(Check{"fail", img.name, ref + " is on no node of the cluster", "pml images save -o pml-images.tar.zst, then on each node: zstd -dc pml-images.tar.zst | tar -xO images.tar | ctr -n k8s.io images import - (or push it to a registry the nodes pull from)"})
		}
	}
	return out
}
