//go:build k8s

package main

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var cidr = netip.MustParsePrefix("10.244.0.0/16")

func pod(ns, name, ip string, lbl map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

func denyAll(ns string, sel map[string]string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deny"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: sel},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

func find(t *testing.T, rs []podRules, name string) podRules {
	t.Helper()
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no rules for pod %s", name)
	return podRules{}
}

func TestDenyAllIsolatesOnlySelectedPods(t *testing.T) {
	s := snapshot{
		Pods: []*corev1.Pod{
			pod("pml", "probe", "10.244.0.5", map[string]string{"app": "probe"}),
			pod("pml", "other", "10.244.0.6", nil),
			pod("default", "probe2", "10.244.0.7", map[string]string{"app": "probe"}),
		},
		Policies: []*networkingv1.NetworkPolicy{denyAll("pml", map[string]string{"app": "probe"})},
	}
	rs := compute(s, cidr)
	p := find(t, rs, "probe")
	if !p.IngressIsolated || !p.EgressIsolated || len(p.Ingress)+len(p.Egress) != 0 {
		t.Fatalf("probe should be isolated both ways with nothing allowed: %+v", p)
	}
	if o := find(t, rs, "other"); o.IngressIsolated || o.EgressIsolated {
		t.Fatalf("an unselected pod must not be isolated: %+v", o)
	}
	if o := find(t, rs, "probe2"); o.IngressIsolated || o.EgressIsolated {
		t.Fatalf("a policy must not select pods of another namespace: %+v", o)
	}
	out := render(rs, nil)
	c := podChain("E", p)
	for _, want := range []string{
		"-A PML-NP-FWD -s 10.244.0.5/32 -j " + c,
		"-A PML-NP-IN -s 10.244.0.5/32 -j " + c,
		"-A " + c + " -j REJECT",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rules lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, c+" -d") || strings.Contains(out, c+"  -j RETURN") {
		t.Errorf("a deny-all pod's chain must not return anything:\n%s", out)
	}
}

func TestPolicyTypesDefaultToIngressOnly(t *testing.T) {
	np := denyAll("pml", nil)
	np.Spec.PolicyTypes = nil
	rs := compute(snapshot{Pods: []*corev1.Pod{pod("pml", "a", "10.244.0.5", nil)}, Policies: []*networkingv1.NetworkPolicy{np}}, cidr)
	if a := find(t, rs, "a"); !a.IngressIsolated || a.EgressIsolated {
		t.Fatalf("a policy without types and without egress rules isolates ingress only: %+v", a)
	}
}

func TestAllowRulesResolvePeersAndPorts(t *testing.T) {
	tcp := corev1.ProtocolTCP
	web := pod("pml", "web", "10.244.0.10", map[string]string{"app": "web"})
	web.Spec.Containers = []corev1.Container{{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}
	s := snapshot{
		Namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "ops", Labels: map[string]string{"team": "ops"}}}},
		Pods: []*corev1.Pod{
			web,
			pod("pml", "client", "10.244.0.11", map[string]string{"role": "client"}),
			pod("pml", "stranger", "10.244.0.12", nil),
			pod("ops", "monitor", "10.244.0.13", nil),
		},
		Policies: []*networkingv1.NetworkPolicy{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "pml", Name: "web"},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{
						{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}},
						{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ops"}}},
					},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &intstr.IntOrString{Type: intstr.String, StrVal: "http"}}},
				}},
			},
		}},
	}
	w := find(t, compute(s, cidr), "web")
	got := map[string]bool{}
	for _, a := range w.Ingress {
		got[fmt.Sprintf("%s %s %d", a.Peer, a.Proto, a.Port)] = true
	}
	want := map[string]bool{"10.244.0.11/32 tcp 8080": true, "10.244.0.13/32 tcp 8080": true}
	if len(got) != len(want) {
		t.Fatalf("allowed %v, want %v", got, want)
	}
	for k := range want {
		if !got[k] {
			t.Fatalf("allowed %v, want %v", got, want)
		}
	}
}

func TestIPBlockExceptIsCarvedOut(t *testing.T) {
	got := subtract(netip.MustParsePrefix("10.0.0.0/8"), []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")})
	covered := func(a string) bool {
		for _, p := range got {
			if p.Contains(netip.MustParseAddr(a)) {
				return true
			}
		}
		return false
	}
	for _, a := range []string{"10.0.0.1", "10.95.255.255", "10.112.0.0", "10.255.255.255"} {
		if !covered(a) {
			t.Errorf("%s should stay allowed; got %v", a, got)
		}
	}
	for _, a := range []string{"10.96.0.1", "10.111.255.255"} {
		if covered(a) {
			t.Errorf("%s is excepted but allowed; got %v", a, got)
		}
	}
	if subtract(netip.MustParsePrefix("10.96.0.0/16"), []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}) != nil {
		t.Error("a block inside an exception allows nothing")
	}
}

func TestUnreadableSelectorAllowsNothing(t *testing.T) {
	np := denyAll("pml", map[string]string{"app": "a"})
	np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
		PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Bogus"}}},
	}}}}
	rs := compute(snapshot{
		Pods:     []*corev1.Pod{pod("pml", "a", "10.244.0.5", map[string]string{"app": "a"}), pod("pml", "b", "10.244.0.6", nil)},
		Policies: []*networkingv1.NetworkPolicy{np},
	}, cidr)
	if a := find(t, rs, "a"); len(a.Ingress) != 0 {
		t.Fatalf("a selector that does not parse must allow nothing: %+v", a.Ingress)
	}
}
