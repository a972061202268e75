//go:build linux && k8s

// Package k8s holds the tests that need the real single-node cluster that cluster.sh starts
// (make test-k8s starts it, loads the images and runs them).
package k8s

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/utils/ptr"

	"github.com/pml-dev/pml/e2e/k8s/kapi"
)

// probeImage is the cluster's own static probe image (cluster.sh imports it into the node).
const probeImage = "pml-test/k8s-netprobe:1"

// smokeKubeconfig is the admin kubeconfig of the test cluster: $KUBECONFIG, else where cluster.sh
// writes it.
func smokeKubeconfig(t *testing.T) string {
	if k := os.Getenv("KUBECONFIG"); k != "" {
		return k
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(home, ".cache", "pml", "k8s", "run", "kubeconfig")
}

func smokeClient(t *testing.T) (*rest.Config, *kapi.Client) {
	t.Helper()
	path := smokeKubeconfig(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("no test cluster (%v): start one with e2e/k8s/cluster.sh up, or run make test-k8s", err)
	}
	cs, err := kapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, cs
}

func TestNodeIsReady(t *testing.T) {
	_, cs := smokeClient(t)
	var nodes corev1.NodeList
	if err := cs.List(context.Background(), kapi.Nodes, "", &nodes); err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	if len(nodes.Items) != 1 {
		t.Fatalf("want the one test node, got %d nodes", len(nodes.Items))
	}
	n := nodes.Items[0]
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status != corev1.ConditionTrue {
				t.Fatalf("node %s not Ready: %s", n.Name, c.Message)
			}
			return
		}
	}
	t.Fatalf("node %s reports no Ready condition", n.Name)
}

// TestNetworkPolicyIsEnforced is the proof that the cluster isolates a pod under a deny-all
// policy: before the policy the same dials succeed, so the test can fail.
func TestNetworkPolicyIsEnforced(t *testing.T) {
	cfg, cs := smokeClient(t)
	ctx := context.Background()
	ns := smokeNamespace(t, cs)
	probe := startNetProbe(t, cs, ns, "probe")
	target := startNetProbe(t, cs, ns, "target")

	var nodes corev1.NodeList
	if err := cs.List(ctx, kapi.Nodes, "", &nodes); err != nil || len(nodes.Items) == 0 {
		t.Fatalf("listing nodes: %v", err)
	}
	var nodeIP string
	for _, a := range nodes.Items[0].Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			nodeIP = a.Address
		}
	}
	var api corev1.Service
	if err := cs.Get(ctx, kapi.Services, "default", "kubernetes", &api); err != nil {
		t.Fatal(err)
	}
	apiService := net.JoinHostPort(api.Spec.ClusterIP, "443")
	apiHost := net.JoinHostPort(nodeIP, strconv.Itoa(apiPort(t, cfg)))
	toTarget := net.JoinHostPort(target.Status.PodIP, "8080")
	toProbe := net.JoinHostPort(probe.Status.PodIP, "8080")

	// A listener on the host's loopback: no pod may reach it, policy or not.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	hostLoopback := net.JoinHostPort(nodeIP, port)

	for _, c := range []struct {
		from, addr string
		reach      bool
	}{
		{"probe", toTarget, true},
		{"target", toProbe, true},
		{"probe", apiService, true},
		{"probe", apiHost, true},
		{"probe", hostLoopback, false},
		{"probe", net.JoinHostPort("127.0.0.1", port), false},
	} {
		if got := execDial(t, cfg, cs, ns, c.from, c.addr); got != c.reach {
			t.Errorf("without a policy: %s dialing %s: reached=%v, want %v", c.from, c.addr, got, c.reach)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "probe"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	if err := cs.Create(ctx, kapi.NetworkPolicies, ns, np, np); err != nil {
		t.Fatal(err)
	}
	// The enforcer acts on the policy's creation within moments; wait for the first sign.
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		return !execDial(t, cfg, cs, ns, "probe", toTarget), nil
	})
	for _, c := range []struct {
		from, addr string
		reach      bool
	}{
		{"probe", toTarget, false},
		{"target", toProbe, false},
		{"probe", apiService, false},
		{"probe", apiHost, false},
		{"probe", hostLoopback, false},
		{"target", apiHost, true}, // an unselected pod is not isolated
	} {
		if got := execDial(t, cfg, cs, ns, c.from, c.addr); got != c.reach {
			t.Errorf("under deny-all on the probe: %s dialing %s: reached=%v, want %v", c.from, c.addr, got, c.reach)
		}
	}
}

// apiPort is the API server's port as the kubeconfig names it.
func apiPort(t *testing.T, cfg *rest.Config) int {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatalf("API server URL %s has no port", cfg.Host)
	}
	return p
}

func smokeNamespace(t *testing.T, cs *kapi.Client) string {
	t.Helper()
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pml-smoke-", Labels: map[string]string{"pml.dev/test": "k8s-smoke"}},
	}
	if err := cs.Create(context.Background(), kapi.Namespaces, "", ns, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Delete(context.Background(), kapi.Namespaces, "", ns.Name)
	})
	// Pods are refused until the controller manager has made the namespace's service account.
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return cs.Get(ctx, kapi.ServiceAccounts, ns.Name, "default", &corev1.ServiceAccount{}) == nil, nil
	})
	if err != nil {
		t.Fatalf("no default service account in %s: %v", ns.Name, err)
	}
	return ns.Name
}

// startNetProbe runs the probe image listening on :8080, as a locked-down pod, and waits for it.
func startNetProbe(t *testing.T, cs *kapi.Client, ns, role string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: role, Labels: map[string]string{"role": role}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65534)), RunAsGroup: ptr.To(int64(65534)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "probe", Image: probeImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"listen", ":8080"},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	if err := cs.Create(ctx, kapi.Pods, ns, p, p); err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		if err := cs.Get(ctx, kapi.Pods, ns, role, &p); err != nil {
			return false, nil
		}
		pod = &p
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not Ready: %v (status %+v)", ns, role, err, pod.Status)
	}
	return pod
}

// execDial runs `/probe dial ADDR` in the pod through the API server's exec subresource and says
// whether the connection opened. Anything but the probe's own verdict fails the test.
func execDial(t *testing.T, cfg *rest.Config, cs *kapi.Client, ns, pod, addr string) bool {
	t.Helper()
	req := cs.Core.Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "probe", Command: []string{"/probe", "dial", addr}, Stdout: true, Stderr: true}, kapi.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		t.Fatal(err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		t.Fatal(err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
	if err != nil {
		t.Fatal(err)
	}
	// Stdout and stderr are copied by separate goroutines: one buffer each.
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return true
	case errors.As(err, &exit) && exit.ExitStatus() == 1:
		return false
	default:
		t.Fatalf("exec in %s/%s: %v: %s%s", ns, pod, err, out.String(), errOut.String())
		return false
	}
}
