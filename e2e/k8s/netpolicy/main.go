//go:build k8s

// Command netpolicy enforces Kubernetes NetworkPolicy on the single-node test cluster that
// e2e/k8s/cluster.sh starts, with iptables rules in chains of its own.
//
// It exists because no maintained enforcer could be had here: kube-router's module is not
// served by the Go module proxy this project reaches, and sigs.k8s.io/kube-network-policies
// needs nftables' queue expression, which this kernel lacks. It implements the
// networking.k8s.io/v1 semantics for IPv4 pods on one node: policyTypes, pod and namespace
// selectors, ipBlock with except, ports (numbered, ranges, named), and rejects everything
// else from an isolated pod, including traffic to the host (the API server). Traffic from the
// host to pods is allowed, as on most implementations (kubelet probes come from there).
// Anything it cannot read (a bad selector, an unresolvable named port) allows nothing.
//
// It is test infrastructure, not part of pml.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pml-dev/pml/e2e/k8s/kapi"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "admin kubeconfig of the cluster")
	cidr := flag.String("pod-cidr", "10.244.0.0/16", "the pod network; only its traffic is filtered")
	clean := flag.Bool("cleanup", false, "remove every rule and chain this program added, then exit")
	flag.Parse()
	if err := run(*kubeconfig, *cidr, *clean); err != nil {
		fmt.Fprintf(os.Stderr, "netpolicy: %v\n", err)
		os.Exit(1)
	}
}

func run(kubeconfig, cidr string, clean bool) error {
	podCIDR, err := netip.ParsePrefix(cidr)
	if err != nil {
		return fmt.Errorf("bad --pod-cidr %q: %w", cidr, err)
	}
	if clean {
		return cleanup(podCIDR)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading kubeconfig %q: %w", kubeconfig, err)
	}
	// REST clients of the two API groups (kapi), not client-go's
	// clientset, typed clients or informer factory: those compile every
	// API group of Kubernetes.
	api, err := kapi.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	informer := func(r kapi.Resource, example runtime.Object) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(cache.NewListWatchFromClient(api.For(r), r.Name(), metav1.NamespaceAll, fields.Everything()),
			example, 10*time.Minute, cache.Indexers{})
	}
	pods := informer(kapi.Pods, &corev1.Pod{})
	nss := informer(kapi.Namespaces, &corev1.Namespace{})
	nps := informer(kapi.NetworkPolicies, &networkingv1.NetworkPolicy{})
	dirty := make(chan struct{}, 1)
	poke := func() {
		select {
		case dirty <- struct{}{}:
		default:
		}
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	all := []cache.SharedIndexInformer{pods, nss, nps}
	for _, inf := range all {
		if _, err := inf.AddEventHandler(h); err != nil {
			return err
		}
		go inf.Run(ctx.Done())
	}
	for i, inf := range all {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("cache for %s did not sync", []string{"pods", "namespaces", "network policies"}[i])
		}
	}
	fmt.Fprintln(os.Stderr, "netpolicy: watching pods, namespaces and network policies")

	// Resync now and then as well, so rules that someone else removed come back.
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	poke()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-dirty:
		}
		var s snapshot
		s.Pods = listOf[*corev1.Pod](pods)
		s.Namespaces = listOf[*corev1.Namespace](nss)
		s.Policies = listOf[*networkingv1.NetworkPolicy](nps)
		rules := compute(s, podCIDR)
		if err := apply(rules, podCIDR); err != nil {
			fmt.Fprintf(os.Stderr, "netpolicy: applying rules: %v\n", err)
			poke() // try again on the next event or tick
			time.Sleep(time.Second)
			continue
		}
		isolated := 0
		for _, r := range rules {
			if r.IngressIsolated || r.EgressIsolated {
				isolated++
			}
		}
		fmt.Fprintf(os.Stderr, "netpolicy: synced %d pods (%d isolated), %d policies\n", len(rules), isolated, len(s.Policies))
	}
}

// listOf is what an informer's cache holds, as T.
func listOf[T any](inf cache.SharedIndexInformer) []T {
	var out []T
	for _, o := range inf.GetStore().List() {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}
